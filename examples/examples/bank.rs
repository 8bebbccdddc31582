//! A bank's nightly payment run, and the bug a simulation finds in it.
//!
//! Accounts live in a "core banking" system (the system of record), reached through
//! one command, `Post`, which debits or credits an account. Each standing order is
//! a `Transfer` process: it debits one account, then credits another, retrying a
//! posting the core did not answer. A supervisor runs the transfers and restarts
//! one that dies. The core ignores a request id it has seen before, so a retried
//! posting is applied once — if the request keeps its id.
//!
//! The planted bug: the transfer gives every attempt a fresh request id. Its tests
//! pass (a real scheduler and core; a flaky core; the transfer stepped by hand),
//! but a simulation applies a posting and loses its answer: the transfer retries
//! with a new id, and the core posts it twice. With lost answers taken out of the
//! plan, the simulation still finds it another way: it kills a transfer between its
//! debit and its credit, its supervisor runs it again from the start, and the debit
//! is applied twice. The fix derives the id from the transfer and the side of the
//! posting, so every attempt of a posting, and every run of a transfer, sends the
//! same one.
//!
//! `main` runs the payment run on a scheduler (it balances), then checks it in
//! simulation over 1,000 seeds (a seed posts money twice), replays that seed alone
//! (the same trace), checks it again without lost answers (another seed, by a
//! crash), and checks the fixed transfers over the same seeds, with both plans (all
//! pass).
//!
//! `cargo run --release -p wsched-examples --example bank [TIMELINE_DIR]`

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use wsched::command::Completer;
use wsched::prelude::*;
use wsched::sim::{
    check, CheckFailure, CheckReport, Faults, SimBuilder, SimHandler, Simulation, TraceEntry,
    TraceEvent, SEED_VARIABLE,
};
use wsched::supervisor::{ChildSpec, Restart, Strategy, Supervisor};
use wsched::Scheduler;

// ANCHOR: core
/// Which way a posting moves money.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Debit,
    Credit,
}

/// The command: post `cents` to `account`. Its output is the balance after it.
#[derive(Debug)]
struct Post {
    /// The core applies a request id once: sent again, it gets its first answer.
    request: u64,
    /// The transfer it belongs to (the statement's reference).
    transfer: u32,
    account: &'static str,
    side: Side,
    cents: u64,
}
impl Command for Post {
    type Output = u64;
}

/// The core's refusal of a debit the balance does not cover.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Refused {
    account: &'static str,
    balance: u64,
}
impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} holds only {}", self.account, money(self.balance))
    }
}
impl std::error::Error for Refused {}

/// The core banking system: the accounts' balances, the answer to every request
/// it has applied, and the postings it made.
#[derive(Debug, Default)]
struct Core {
    balances: BTreeMap<&'static str, u64>,
    answers: BTreeMap<u64, Result<u64, Refused>>,
    journal: Vec<(u32, &'static str, Side, u64)>,
}

impl Core {
    fn open(accounts: &[(&'static str, u64)]) -> Self {
        Self {
            balances: accounts.iter().copied().collect(),
            ..Self::default()
        }
    }

    /// Applies a posting once per request id.
    fn post(&mut self, post: Post) -> Result<u64, Refused> {
        if let Some(answer) = self.answers.get(&post.request) {
            return answer.clone();
        }
        let balance = self.balances.entry(post.account).or_default();
        let answer = match post.side {
            Side::Debit if *balance < post.cents => Err(Refused {
                account: post.account,
                balance: *balance,
            }),
            Side::Debit => {
                *balance -= post.cents;
                Ok(*balance)
            }
            Side::Credit => {
                *balance += post.cents;
                Ok(*balance)
            }
        };
        if answer.is_ok() {
            self.journal
                .push((post.transfer, post.account, post.side, post.cents));
        }
        self.answers.insert(post.request, answer.clone());
        answer
    }

    fn total(&self) -> u64 {
        self.balances.values().sum()
    }
}
// ANCHOR_END: core

/// The core, shared by its handler and whoever checks it.
type SharedCore = Arc<Mutex<Core>>;

fn lock(core: &SharedCore) -> std::sync::MutexGuard<'_, Core> {
    core.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A standing order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Order {
    id: u32,
    from: &'static str,
    to: &'static str,
    cents: u64,
}

/// How a transfer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Moved,
    /// The core refused the debit: the money was not there.
    Declined,
    /// The core did not answer the debit, attempt after attempt: nothing moved.
    Unavailable,
}

/// What a transfer tells the statement when it ends.
#[derive(Debug)]
struct Report {
    order: Order,
    outcome: Outcome,
}

/// Which request ids a transfer sends: the planted bug, or its fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ids {
    PerAttempt,
    PerPosting,
}

/// Debit attempts before a transfer gives up (nothing has moved yet).
const DEBIT_ATTEMPTS: u32 = 5;

// ANCHOR: transfer
/// Moves one order's money: debits `from`, then credits `to`.
struct Transfer {
    order: Order,
    ids: Ids,
    statement: Pid,
}

#[process]
impl Transfer {
    #[entry]
    fn run(&mut self) -> Result<Outcome, BoxError> {
        let outcome = match self.post(Side::Debit, DEBIT_ATTEMPTS).await? {
            Err(Unposted::Refused) => Outcome::Declined,
            Err(Unposted::Unavailable) => Outcome::Unavailable,
            Ok(()) => {
                // The money has left `from`: it must arrive, however long it takes.
                self.post(Side::Credit, u32::MAX).await??;
                Outcome::Moved
            }
        };
        // Best effort: a statement that has gone must not make the transfer fail
        // (its supervisor would run it again).
        let report = Report {
            order: self.order,
            outcome,
        };
        let _ = this::send(self.statement, report);
        Ok(outcome)
    }

    /// Posts one side of the transfer, retrying what the core did not answer.
    #[suspend]
    fn post(&mut self, side: Side, attempts: u32) -> Result<Result<(), Unposted>, BoxError> {
        let Order {
            id,
            from,
            to,
            cents,
        } = self.order;
        let account = if side == Side::Debit { from } else { to };
        for attempt in 1..=attempts {
            let post = Post {
                request: self.request_id(side),
                transfer: id,
                account,
                side,
                cents,
            };
            match yield_cmd!(post) {
                Ok(_balance) => return Ok(Ok(())),
                Err(YieldError::Failed { source, .. }) if source.is::<Refused>() => {
                    return Ok(Err(Unposted::Refused));
                }
                // The core did not answer, or not before the client's deadline:
                // wait a little, and try again.
                Err(YieldError::Failed { .. } | YieldError::TimedOut { .. }) => {
                    yield_cmd!(Sleep(backoff(attempt)))?;
                }
                Err(other) => return Err(other.into()),
            }
        }
        Ok(Err(Unposted::Unavailable))
    }

    // ANCHOR: ids
    /// The request id of one attempt at posting `side`.
    fn request_id(&self, side: Side) -> u64 {
        match self.ids {
            // The bug: a fresh id per attempt, unique as the core asks. Retrying
            // a request the core never received is safe; retrying one it applied
            // (its answer lost on the way back), or running the transfer again
            // after a crash, posts the money twice.
            Ids::PerAttempt => this::random(),
            // The fix: one id per transfer and side, the same for every attempt
            // and every run of the transfer, so the core applies it once.
            Ids::PerPosting => (u64::from(self.order.id) << 1) | u64::from(side == Side::Credit),
        }
    }
    // ANCHOR_END: ids
}
// ANCHOR_END: transfer

/// Why a posting did not happen.
#[derive(Debug, PartialEq, Eq)]
enum Unposted {
    Refused,
    Unavailable,
}

impl fmt::Display for Unposted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Refused => "the core refused the posting",
            Self::Unavailable => "the core did not answer",
        })
    }
}
impl std::error::Error for Unposted {}

/// 20 ms, 40 ms, 80 ms … up to a second.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(10 << attempt.min(7)).min(Duration::from_secs(1))
}

/// Collects one report per order; ends with them all.
struct Statement;

#[process]
impl Statement {
    #[entry]
    fn collect(&mut self, orders: usize) -> Result<BTreeMap<u32, Outcome>, BoxError> {
        let mut outcomes = BTreeMap::new();
        while outcomes.len() < orders {
            let Report { order, outcome } = recv!(Report)?;
            outcomes.insert(order.id, outcome);
        }
        Ok(outcomes)
    }
}

// ANCHOR: run
/// The payment run: a supervisor with one transfer per order, each restarted if
/// it dies before it has finished.
fn payment_run(orders: &[Order], ids: Ids, statement: Pid) -> Supervisor {
    let supervisor = Supervisor::new(Strategy::OneForOne).intensity(100, Duration::from_secs(1));
    orders.iter().fold(supervisor, |supervisor, &order| {
        let transfer = move || Transfer {
            order,
            ids,
            statement,
        };
        let spec = ChildSpec::new(
            format!("transfer-{}", order.id),
            transfer,
            Transfer::RUN,
            (),
        )
        .restart(Restart::Transient);
        supervisor.child(spec)
    })
}
// ANCHOR_END: run

const ACCOUNTS: [(&str, u64); 4] = [
    ("alice", 10_000),
    ("bob", 10_000),
    ("carol", 10_000),
    ("dave", 10_000),
];

const fn order(id: u32, from: &'static str, to: &'static str, cents: u64) -> Order {
    Order {
        id,
        from,
        to,
        cents,
    }
}

/// Tonight's standing orders. Some may be declined, depending on which ran first.
const ORDERS: [Order; 12] = [
    order(1, "alice", "bob", 2_500),
    order(2, "bob", "carol", 6_000),
    order(3, "carol", "dave", 8_000),
    order(4, "dave", "alice", 3_000),
    order(5, "alice", "carol", 4_500),
    order(6, "bob", "dave", 7_000),
    order(7, "carol", "alice", 1_500),
    order(8, "dave", "bob", 5_500),
    order(9, "alice", "dave", 4_000),
    order(10, "carol", "bob", 3_500),
    order(11, "bob", "alice", 2_000),
    order(12, "dave", "carol", 9_000),
];

fn money(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// `never`, `once`, `twice`, `3 times` ….
fn times(n: usize) -> String {
    match n {
        0 => "never".to_owned(),
        1 => "once".to_owned(),
        2 => "twice".to_owned(),
        n => format!("{n} times"),
    }
}

// ANCHOR: invariant
/// What must hold once the run is over: every order reported, and the money the
/// accounts hold is the money they started with (the core never lets one go
/// below zero).
fn audit(core: &Core, outcomes: &BTreeMap<u32, Outcome>) -> Result<(), String> {
    if let Some(missing) = ORDERS.iter().find(|o| !outcomes.contains_key(&o.id)) {
        return Err(format!("order {} never reported", missing.id));
    }
    let start: u64 = ACCOUNTS.iter().map(|(_, cents)| cents).sum();
    if core.total() == start {
        return Ok(());
    }
    // Which transfer posted more than once: the journal says.
    let mut twice = String::new();
    for order in &ORDERS {
        let postings = |side| {
            let posted = core
                .journal
                .iter()
                .filter(|p| p.0 == order.id && p.2 == side);
            posted.count()
        };
        let (debits, credits) = (postings(Side::Debit), postings(Side::Credit));
        if debits > 1 || credits > 1 {
            twice += &format!(
                "; transfer {} ({} -> {}, {}) debited {}, credited {}",
                order.id,
                order.from,
                order.to,
                money(order.cents),
                times(debits),
                times(credits)
            );
        }
    }
    Err(format!(
        "money was not conserved: the accounts hold {}, not {}{twice}",
        money(core.total()),
        money(start)
    ))
}
// ANCHOR_END: invariant

/// Runs the payment run on a real scheduler, with the core as its handler.
fn run_on_scheduler(
    ids: Ids,
) -> Result<(Core, BTreeMap<u32, Outcome>), Box<dyn std::error::Error>> {
    let core: SharedCore = Arc::new(Mutex::new(Core::open(&ACCOUNTS)));
    let handler_core = core.clone();
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            move |post: Post, done: Completer<Post>| match lock(&handler_core).post(post) {
                Ok(balance) => done.complete(balance),
                Err(refused) => done.fail(refused),
            },
        )
        .build()?;
    let statement = scheduler.spawn(Statement, Statement::COLLECT, (ORDERS.len(),))?;
    let run = scheduler.spawn(payment_run(&ORDERS, ids, statement), Supervisor::ENTRY, ())?;
    let outcomes = scheduler
        .wait(statement)?
        .downcast::<BTreeMap<u32, Outcome>>()?;
    scheduler.cancel(run)?;
    scheduler.shutdown(Duration::from_secs(1));
    let core = std::mem::take(&mut *lock(&core));
    Ok((core, outcomes))
}

// ANCHOR: simulation
/// How long the core's client waits for an answer before it gives up on a posting:
/// twice the slowest answer a drawn plan gives (its latencies go up to 50 ms), so
/// that only a posting left without an answer reaches it.
const CORE_DEADLINE: Duration = Duration::from_millis(100);

/// The faults a seed's simulation injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// The plan `Faults::from_seed` draws.
    Drawn,
    /// The same plan, without lost answers: a posting is never applied unanswered.
    NoLostAnswers,
}

/// One seed's simulation of the payment run: the application's scheduler, with a
/// simulated core in place of the real one, and a fault plan drawn from the seed.
fn simulation(seed: u64, plan: Plan, core: &SharedCore) -> SimBuilder {
    *lock(core) = Core::open(&ACCOUNTS);
    let handler_core = core.clone();
    let simulated_core =
        SimHandler::new(move |post: Post| lock(&handler_core).post(post).map_err(Into::into))
            // The core's client has a deadline: a posting that hangs fails with
            // `YieldError::TimedOut` instead, as a real client's would.
            .timeout(CORE_DEADLINE);
    let faults = match plan {
        Plan::Drawn => Faults::from_seed(seed),
        Plan::NoLostAnswers => Faults::from_seed(seed).handler_lost_answer(0.0),
    };
    Simulation::builder()
        .seed(seed)
        .faults(faults)
        .handler(simulated_core)
}

/// The check's body: the payment run to its end, then the audit.
fn payment_run_balances(sim: &mut Simulation, ids: Ids, core: &SharedCore) -> Result<(), String> {
    let statement = sim
        .spawn(Statement, Statement::COLLECT, (ORDERS.len(),))
        .map_err(|e| e.to_string())?;
    let run = sim
        .spawn(payment_run(&ORDERS, ids, statement), Supervisor::ENTRY, ())
        .map_err(|e| e.to_string())?;
    // The crashes are for the transfers: the statement is the test's observer,
    // and the supervisor stands for the node itself.
    sim.protect(statement);
    sim.protect(run);
    let outcomes = sim
        .wait(statement)
        .map_err(|e| e.to_string())?
        .downcast::<BTreeMap<u32, Outcome>>()
        .map_err(|e| e.to_string())?;
    audit(&lock(core), &outcomes)
}

/// Checks the payment run over `seeds`.
fn check_payment_run(
    ids: Ids,
    plan: Plan,
    seeds: std::ops::Range<u64>,
    timelines: &std::path::Path,
) -> Result<CheckReport, Box<CheckFailure>> {
    let core = SharedCore::default();
    check(|seed| simulation(seed, plan, &core))
        .seeds(seeds)
        .timeline_dir(timelines)
        .command("cargo run -p wsched-examples --example bank")
        .run(|sim| payment_run_balances(sim, ids, &core))
}
// ANCHOR_END: simulation

/// One seed run alone, as the report's command runs it.
struct Replay {
    /// The check's error, if it failed.
    error: Option<String>,
    trace_hash: u64,
    /// The faults of the whole trace, not only of its tail: its events other than
    /// steps and delays.
    faults: Vec<TraceEntry>,
}

/// Runs one seed alone, keeping its whole trace.
fn replay(seed: u64, ids: Ids, plan: Plan) -> Result<Replay, Box<dyn std::error::Error>> {
    let core = SharedCore::default();
    let mut sim = simulation(seed, plan, &core).keep_trace(true).build()?;
    let error = payment_run_balances(&mut sim, ids, &core).err();
    let faults = sim
        .trace()
        .unwrap_or_default()
        .into_iter()
        .filter(|entry| !matches!(entry.event, TraceEvent::Step | TraceEvent::Delay(_)))
        .collect();
    Ok(Replay {
        error,
        trace_hash: sim.trace_hash(),
        faults,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let timelines = std::env::args()
        .nth(1)
        .map_or_else(|| std::env::temp_dir().join("wsched-bank"), Into::into);
    // `check` runs only the seed this names, to reproduce a failure.
    let seeds = match std::env::var(SEED_VARIABLE) {
        Ok(seed) => format!("seed {seed} only ({SEED_VARIABLE})"),
        Err(_) => "seeds 0..1000".to_owned(),
    };

    println!("== the payment run on a scheduler, with the real core");
    let (core, outcomes) = run_on_scheduler(Ids::PerAttempt)?;
    let moved = outcomes.values().filter(|o| **o == Outcome::Moved).count();
    println!(
        "  {moved} of {} orders moved money; {} declined (the money was not there yet)",
        ORDERS.len(),
        ORDERS.len() - moved
    );
    for (account, cents) in &core.balances {
        println!("  {account:6} {:>7}", money(*cents));
    }
    audit(&core, &outcomes)?;
    println!(
        "  audit: the accounts hold {}, as they did",
        money(core.total())
    );

    println!("\n== the same run, simulated: {seeds}, faults drawn from each seed");
    // With `WSCHED_SIM_SEED` set to a seed only the second search fails, this one
    // may pass: the program goes on to the next.
    if let Some(failure) = hunt(Plan::Drawn, &timelines) {
        println!("\n== seed {} again, alone", failure.seed);
        let again = replay(failure.seed, Ids::PerAttempt, Plan::Drawn)?;
        println!("  error: {}", again.error.as_deref().unwrap_or("none"));
        println!(
            "  trace {:016x}: {}",
            again.trace_hash,
            if again.trace_hash == failure.trace_hash {
                "the same run, step for step"
            } else {
                "A DIFFERENT RUN"
            }
        );
        println!("  its faults, from the whole trace:");
        for entry in &again.faults {
            println!("    {entry}");
        }
    }

    println!("\n== again without lost answers: {seeds}, the same plans less their lost answers");
    hunt(Plan::NoLostAnswers, &timelines);

    println!("\n== the fix, one request id per posting: {seeds}");
    for (plan, which) in [
        (Plan::Drawn, ""),
        (Plan::NoLostAnswers, " without lost answers"),
    ] {
        let started = Instant::now();
        match check_payment_run(Ids::PerPosting, plan, 0..1_000, &timelines) {
            Ok(report) => println!(
                "  {} seeds passed{which} ({} distinct runs, {} steps) in {:.2} s",
                report.seeds,
                report.distinct_traces,
                report.steps,
                started.elapsed().as_secs_f64()
            ),
            Err(failure) => return Err(format!("the fix fails:\n{failure}").into()),
        }
    }
    Ok(())
}

/// Checks the transfers with the planted bug over seeds 0..1000 under `plan`, and
/// prints what it finds: the first failure's report, or the seeds that passed.
fn hunt(plan: Plan, timelines: &std::path::Path) -> Option<Box<CheckFailure>> {
    let started = Instant::now();
    match check_payment_run(Ids::PerAttempt, plan, 0..1_000, timelines) {
        Ok(report) => {
            println!("  {report}");
            None
        }
        Err(failure) => {
            println!(
                "  a seed fails ({:.2} s):\n",
                started.elapsed().as_secs_f64()
            );
            print!("{failure}");
            Some(failure)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wsched::testing::{TestProcess, TestStatus};
    use wsched::Tag;

    /// The ordinary test: the real scheduler and a well-behaved core.
    #[test]
    fn the_payment_run_balances_on_a_scheduler() {
        let (core, outcomes) = run_on_scheduler(Ids::PerAttempt).unwrap();
        assert_eq!(outcomes.len(), ORDERS.len());
        audit(&core, &outcomes).unwrap();
    }

    /// A core that fails every third request: the transfers retry, and it balances.
    #[test]
    fn transfers_retry_a_flaky_core_and_it_still_balances() {
        let core: SharedCore = Arc::new(Mutex::new(Core::open(&ACCOUNTS)));
        let handler_core = core.clone();
        let requests = std::sync::atomic::AtomicU64::new(0);
        let scheduler = Scheduler::builder()
            .workers(2)
            .handler(move |post: Post, done: Completer<Post>| {
                if requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 3 == 2 {
                    return done.fail("connection reset");
                }
                match lock(&handler_core).post(post) {
                    Ok(balance) => done.complete(balance),
                    Err(refused) => done.fail(refused),
                }
            })
            .build()
            .unwrap();
        let statement = scheduler
            .spawn(Statement, Statement::COLLECT, (ORDERS.len(),))
            .unwrap();
        scheduler
            .spawn(
                payment_run(&ORDERS, Ids::PerAttempt, statement),
                Supervisor::ENTRY,
                (),
            )
            .unwrap();
        let outcomes = scheduler
            .wait(statement)
            .unwrap()
            .downcast::<BTreeMap<u32, Outcome>>()
            .unwrap();
        scheduler.shutdown(Duration::from_secs(1));
        audit(&lock(&core), &outcomes).unwrap();
    }

    fn failed(error: impl Into<BoxError>) -> YieldError {
        YieldError::Failed {
            command: "Post",
            source: error.into(),
        }
    }

    // ANCHOR: harness
    /// The transfer stepped by hand: a failed debit is retried after a pause,
    /// then the credit follows and the statement hears of it.
    #[test]
    fn a_transfer_retries_a_failed_debit_then_credits() {
        let order = ORDERS[0];
        let statement = Pid::from_raw(7);
        let transfer = Transfer {
            order,
            ids: Ids::PerAttempt,
            statement,
        };
        let mut t = TestProcess::start(transfer, Transfer::RUN, ()).unwrap();
        let (tag, debit) = t.take_yield::<Post>();
        assert_eq!(
            (debit.account, debit.side, debit.cents),
            ("alice", Side::Debit, 2_500)
        );
        t.fail(tag, failed("connection reset"));
        let (tag, pause) = t.take_yield::<Sleep>();
        assert_eq!(pause.0, backoff(1));
        t.complete(tag, ());
        let (tag, again) = t.take_yield::<Post>();
        assert_eq!((again.account, again.side), ("alice", Side::Debit));
        t.complete(tag, 7_500_u64);
        let (tag, credit) = t.take_yield::<Post>();
        assert_eq!(
            (credit.account, credit.side, credit.cents),
            ("bob", Side::Credit, 2_500)
        );
        t.complete(tag, 12_500_u64);
        assert_eq!(t.result::<Outcome>(), Outcome::Moved);
        let sent = t.take_sent();
        assert_eq!(sent[0].to, statement);
        let report = sent[0].payload.downcast_ref::<Report>().unwrap();
        assert_eq!((report.order, report.outcome), (order, Outcome::Moved));
    }
    // ANCHOR_END: harness

    /// A refused debit ends the transfer declined, with no credit.
    #[test]
    fn a_refused_debit_declines_the_transfer() {
        let transfer = Transfer {
            order: ORDERS[1],
            ids: Ids::PerAttempt,
            statement: Pid::from_raw(7),
        };
        let mut t = TestProcess::start(transfer, Transfer::RUN, ()).unwrap();
        let refused = Refused {
            account: "bob",
            balance: 1_000,
        };
        t.fail(Tag(1), failed(refused));
        assert_eq!(t.status(), TestStatus::Done);
        assert_eq!(t.result::<Outcome>(), Outcome::Declined);
    }

    // ANCHOR: found
    /// The simulation finds the bug within 1,000 seeds; its seed fails again alone,
    /// with the same trace.
    #[test]
    fn the_simulation_finds_money_lost_and_its_seed_reproduces_it() {
        let dir = std::env::temp_dir().join(format!("wsched-bank-{}", std::process::id()));
        let failure = match check_payment_run(Ids::PerAttempt, Plan::Drawn, 0..1_000, &dir) {
            Err(failure) => failure,
            // One seed only (`WSCHED_SIM_SEED`), one this plan passes.
            Ok(_) if std::env::var_os(SEED_VARIABLE).is_some() => return,
            Ok(report) => panic!("no seed loses money: {report}"),
        };
        let report = failure.to_string();
        assert!(
            failure.error.contains("money was not conserved"),
            "{report}"
        );
        // The audit names the transfer that posted more than once.
        assert!(failure.error.contains("; transfer "), "{report}");
        assert!(failure.reproduced, "{report}");
        assert!(
            report.contains(&format!(
                "WSCHED_SIM_SEED={} cargo run -p wsched-examples --example bank",
                failure.seed
            )),
            "{report}"
        );
        let again = replay(failure.seed, Ids::PerAttempt, Plan::Drawn).unwrap();
        assert_eq!(again.error.as_deref(), Some(failure.error.as_str()));
        assert_eq!(again.trace_hash, failure.trace_hash);
        // A posting applied and its answer lost, retried with a new id.
        let lost = |e: &TraceEntry| e.event == TraceEvent::LostAnswer;
        assert!(again.faults.iter().any(lost), "{report}");
        // The same seed with the fixed transfers balances.
        let fixed = replay(failure.seed, Ids::PerPosting, Plan::Drawn).unwrap();
        assert_eq!(fixed.error, None);
        let _ = std::fs::remove_dir_all(&dir);
    }
    // ANCHOR_END: found

    /// Without lost answers, the simulation still finds the bug: a transfer killed
    /// after a posting, run again from the start by its supervisor.
    #[test]
    fn without_lost_answers_a_crash_and_a_restart_post_twice() {
        let dir = std::env::temp_dir().join(format!("wsched-bank-crash-{}", std::process::id()));
        let failure = match check_payment_run(Ids::PerAttempt, Plan::NoLostAnswers, 0..1_000, &dir)
        {
            Err(failure) => failure,
            Ok(_) if std::env::var_os(SEED_VARIABLE).is_some() => return,
            Ok(report) => panic!("no seed loses money: {report}"),
        };
        let report = failure.to_string();
        assert!(failure.error.contains("; transfer "), "{report}");
        assert!(failure.reproduced, "{report}");
        assert_eq!(
            failure.faults.as_ref().map(|f| f.handler_lost_answer),
            Some(0.0),
            "{report}"
        );
        let again = replay(failure.seed, Ids::PerAttempt, Plan::NoLostAnswers).unwrap();
        assert_eq!(again.trace_hash, failure.trace_hash);
        assert!(
            again
                .faults
                .iter()
                .all(|e| e.event != TraceEvent::LostAnswer),
            "{report}"
        );
        assert!(
            again.faults.iter().any(|e| e.event == TraceEvent::Crash),
            "{report}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A posting that hangs times out at the core's deadline, and is retried.
    #[test]
    fn a_timed_out_debit_is_retried() {
        let transfer = Transfer {
            order: ORDERS[0],
            ids: Ids::PerAttempt,
            statement: Pid::from_raw(7),
        };
        let mut t = TestProcess::start(transfer, Transfer::RUN, ()).unwrap();
        let (tag, _debit) = t.take_yield::<Post>();
        let timed_out = YieldError::TimedOut {
            command: "Post",
            after: CORE_DEADLINE,
        };
        t.fail(tag, timed_out);
        let (tag, pause) = t.take_yield::<Sleep>();
        assert_eq!(pause.0, backoff(1));
        t.complete(tag, ());
        let (_, again) = t.take_yield::<Post>();
        assert_eq!((again.account, again.side), ("alice", Side::Debit));
        assert_eq!(t.status(), TestStatus::WaitingForYields);
    }

    /// The fix passes every seed, with either plan.
    #[test]
    fn the_fixed_transfers_pass_1000_seeds() {
        let dir = std::env::temp_dir().join(format!("wsched-bank-fixed-{}", std::process::id()));
        for plan in [Plan::Drawn, Plan::NoLostAnswers] {
            let report = check_payment_run(Ids::PerPosting, plan, 0..1_000, &dir)
                .unwrap_or_else(|f| panic!("{f}"));
            if std::env::var_os(SEED_VARIABLE).is_none() {
                assert_eq!(report.seeds, 1_000);
                assert!(report.distinct_traces > 990, "{report}");
            }
        }
    }
}
