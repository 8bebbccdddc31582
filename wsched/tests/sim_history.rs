//! One process's history recorded on the threaded scheduler and replayed in the
//! test harness (`wsched::sim::history`): replays without divergence, a changed
//! entry body found at the right step, stopping at a step and going on by hand, the
//! flight recorder, and a history saved in the repository
//! (`tests/histories/shop.json`).
//!
//! `cargo test -p wsched --features sim,serde --test sim_history`; set
//! `WSCHED_REGENERATE_HISTORIES=1` to write the saved history again after a change
//! to `Shop`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use wsched::command::Completer;
use wsched::prelude::*;
use wsched::sim::history::{
    replay, replay_to, Codecs, DivergenceKind, History, Outcome, RecordedEvent,
};
use wsched::testing::TestStatus;
use wsched::{Scheduler, SpawnOptions};

/// A message: an order for `qty` of `item`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Order {
    item: String,
    qty: u64,
}

/// A command: the price of `item`, in cents (handled inline).
#[derive(Debug, Serialize, Deserialize)]
struct Price {
    item: String,
}

impl Command for Price {
    type Output = u64;
}

fn price_of(item: &str) -> u64 {
    item.len() as u64 * 100
}

/// Takes `orders` orders, prices each, naps after each, and totals them.
struct Shop {
    total: u64,
}

#[process]
impl Shop {
    #[entry]
    fn run(&mut self, customer: String, orders: u32) -> Result<String, BoxError> {
        for _ in 0..orders {
            let order = recv!(Order)?;
            let cents = yield_cmd!(Price { item: order.item })?;
            self.total += cents * order.qty;
            yield_cmd!(Sleep(Duration::from_millis(1)))?;
        }
        Ok(format!("{customer} owes {}", self.total))
    }
}

/// `Shop` with one change: it asks the price of its second order's item in
/// capitals.
struct ShopShouting {
    total: u64,
}

#[process]
impl ShopShouting {
    #[entry]
    fn run(&mut self, customer: String, orders: u32) -> Result<String, BoxError> {
        for i in 0..orders {
            let order = recv!(Order)?;
            let item = if i == 1 {
                order.item.to_uppercase()
            } else {
                order.item
            };
            let cents = yield_cmd!(Price { item })?;
            self.total += cents * order.qty;
            yield_cmd!(Sleep(Duration::from_millis(1)))?;
        }
        Ok(format!("{customer} owes {}", self.total))
    }
}

fn codecs() -> Codecs {
    let mut codecs = Codecs::new();
    codecs.register::<Order>("Order").register::<Price>("Price");
    codecs
}

fn scheduler(codecs: Codecs) -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .history_codecs(codecs)
        .handler(|price: Price, done: Completer<Price>| done.complete(price_of(&price.item)))
        .build()
        .expect("a scheduler")
}

fn orders() -> Vec<Order> {
    ["tea", "scones", "jam"]
        .into_iter()
        .enumerate()
        .map(|(i, item)| Order {
            item: item.to_owned(),
            qty: i as u64 + 1,
        })
        .collect()
}

/// Runs a `Shop` for "ada" with [`orders`] on `scheduler`, recorded; its history.
fn record_shop(scheduler: &Scheduler) -> History {
    let orders = orders();
    let record = SpawnOptions::new().record_history();
    let pid = scheduler
        .spawn_with(
            Shop { total: 0 },
            Shop::RUN,
            ("ada".to_owned(), orders.len() as u32),
            record,
        )
        .expect("spawned");
    for order in orders {
        scheduler.send(pid, order).expect("sent");
    }
    let owed = scheduler.wait(pid).expect("done").downcast::<String>();
    assert_eq!(owed.expect("a String"), "ada owes 2400");
    scheduler.take_history(pid).expect("recorded")
}

/// The number of the step that yielded the tag `tag`.
fn step_yielding(history: &History, tag: u64) -> usize {
    history
        .steps
        .iter()
        .find(|s| s.yields.iter().any(|y| y.tag == tag))
        .unwrap_or_else(|| panic!("no step yielded <{tag}>:\n{history}"))
        .number
}

#[test]
fn a_history_recorded_on_the_scheduler_replays_without_divergence() {
    let scheduler = scheduler(codecs());
    let history = record_shop(&scheduler);
    assert!(history.process_type.ends_with("Shop"), "{history}");
    assert_eq!((history.entry.as_str(), history.args.len()), ("run", 2));
    assert!(history.is_complete());
    // Three prices and three naps, tagged in order, each with its value.
    let yields: Vec<_> = history.steps.iter().flat_map(|s| &s.yields).collect();
    assert_eq!(yields.len(), 6, "{history}");
    for (i, y) in yields.iter().enumerate() {
        assert_eq!(y.tag, i as u64 + 1);
        assert!(y.command.encoded.is_some(), "{history}");
    }
    let messages = history
        .steps
        .iter()
        .flat_map(|s| &s.events)
        .filter(|e| matches!(e, RecordedEvent::Message { .. }))
        .count();
    assert_eq!(messages, 3);
    assert!(
        matches!(&history.outcome, Outcome::Done(v) if v.encoded.as_ref().unwrap().text == "ada owes 2400")
    );

    let mut report = replay(&history, Shop { total: 0 }, &codecs()).expect("no divergence");
    assert_eq!(report.steps(), history.steps.len());
    assert_eq!(report.compared_by_name(), 0, "every value compared whole");
    assert_eq!(report.process().result::<String>(), "ada owes 2400");
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_changed_entry_body_diverges_at_the_step_it_changed() {
    let scheduler = scheduler(codecs());
    let history = record_shop(&scheduler);
    // The second `Price` is the third yield.
    let changed = step_yielding(&history, 3);
    let divergence = replay(&history, ShopShouting { total: 0 }, &codecs())
        .expect_err("the second price is asked differently");
    assert_eq!(divergence.kind(), DivergenceKind::Yields);
    assert_eq!(divergence.step(), changed, "{divergence}\n{history}");
    assert!(
        divergence.expected().contains(r#""scones""#),
        "{divergence}"
    );
    assert!(divergence.found().contains(r#""SCONES""#), "{divergence}");
    let text = divergence.to_string();
    assert!(text.contains(&format!("at step {changed}")), "{text}");
    assert!(
        text.contains("the entry's code up to this step changed"),
        "{text}"
    );
    // Replayed up to the step before, the changed process goes along.
    replay_to(&history, ShopShouting { total: 0 }, &codecs(), changed - 1)
        .expect("the same until then");
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_replay_stops_at_a_step_and_the_test_goes_on_by_hand() {
    let scheduler = scheduler(codecs());
    let history = record_shop(&scheduler);
    // Stop where the first price was asked, and answer it otherwise.
    let asked = step_yielding(&history, 1);
    let mut t = replay_to(&history, Shop { total: 0 }, &codecs(), asked).expect("the same");
    assert_eq!(t.steps(), asked);
    let (tag, price) = t.expect_yield::<Price>();
    assert_eq!((tag, price.item.as_str()), (Tag(1), "tea"));
    t.complete(tag, 1_u64);
    let (tag, _) = t.expect_yield::<Sleep>();
    t.complete(tag, ());
    // The orders the process got by then (several may come in one step, and wait
    // in the process for its `recv!`); the others, by hand.
    let received = history.steps[..asked]
        .iter()
        .flat_map(|s| &s.events)
        .filter(|e| matches!(e, RecordedEvent::Message { .. }))
        .count();
    let mut to_send = orders().into_iter().skip(received);
    for _ in 1..orders().len() {
        if t.status() == TestStatus::WaitingForMessage {
            t.send(to_send.next().expect("an order left"));
        }
        let (tag, price) = t.expect_yield::<Price>();
        let cents = price_of(&price.item);
        t.complete(tag, cents);
        let (tag, _) = t.expect_yield::<Sleep>();
        t.complete(tag, ());
    }
    assert_eq!(t.result::<String>(), "ada owes 2101");

    let beyond = replay_to(
        &history,
        Shop { total: 0 },
        &codecs(),
        history.last_step() + 1,
    )
    .expect_err("no such step");
    assert_eq!(beyond.kind(), DivergenceKind::NoSuchStep);
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_value_kept_by_name_only_cannot_be_fed_and_the_error_says_what_to_do() {
    // Recorded without a codec for `Order`: its messages are kept by name.
    let scheduler = scheduler(Codecs::new());
    let history = record_shop(&scheduler);
    let first_order = history
        .steps
        .iter()
        .find(|s| !s.events.is_empty())
        .expect("a step got the orders")
        .number;
    let divergence = replay(&history, Shop { total: 0 }, &codecs()).expect_err("cannot feed");
    assert_eq!(divergence.kind(), DivergenceKind::CannotFeed);
    assert_eq!(divergence.step(), first_order);
    assert!(
        divergence.found().contains("only its type name"),
        "{divergence}"
    );
    assert!(
        divergence.to_string().contains("register a codec"),
        "{divergence}"
    );
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_history_taken_while_the_process_runs_replays_as_running() {
    let scheduler = scheduler(codecs());
    let record = SpawnOptions::new().record_history();
    let pid = scheduler
        .spawn_with(
            Shop { total: 0 },
            Shop::RUN,
            ("bo".to_owned(), 2_u32),
            record,
        )
        .expect("spawned");
    let so_far = scheduler.history(pid).expect("recorded");
    assert_eq!(so_far.outcome, Outcome::Running);
    let report = replay(&so_far, Shop { total: 0 }, &codecs()).expect("the same so far");
    assert!(!report.into_process().is_ended());
    for order in orders().into_iter().take(2) {
        scheduler.send(pid, order).expect("sent");
    }
    scheduler.wait(pid).expect("done");
    let whole = scheduler.take_history(pid).expect("recorded");
    assert!(matches!(whole.outcome, Outcome::Done(_)));
    replay(&whole, Shop { total: 0 }, &codecs()).expect("no divergence");
    assert!(scheduler.take_history(pid).is_none(), "taken already");
    scheduler.shutdown(Duration::from_secs(5));
}

/// Command the flight-recorded process yields (completed at once, inline).
struct Tick;

impl Command for Tick {
    type Output = ();
}

/// Adds up the numbers it gets, ticking after each; fails on a 0.
struct Fragile {
    sum: u32,
}

#[process]
impl Fragile {
    #[entry]
    fn add(&mut self, until: u32) -> Result<u32, BoxError> {
        while self.sum < until {
            let n = recv!(u32)?;
            if n == 0 {
                return Err(format!("got a zero after {}", self.sum).into());
            }
            self.sum += n;
            yield_cmd!(Tick)?;
        }
        Ok(self.sum)
    }
}

#[test]
fn a_flight_recorder_dumps_the_last_steps_of_a_failing_process() {
    let hooked = Arc::new(Mutex::new(Vec::new()));
    let to_hook = hooked.clone();
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(|_: Tick, done: Completer<Tick>| done.complete(()))
        .flight_recorder::<Fragile>(3)
        .on_flight_dump(move |history| to_hook.lock().unwrap().push(history.clone()))
        .build()
        .expect("a scheduler");

    // One that finishes: nothing dumped.
    let fine = scheduler
        .spawn(Fragile { sum: 0 }, Fragile::ADD, (3_u32,))
        .expect("spawned");
    for _ in 0..3 {
        scheduler.send(fine, 1_u32).expect("sent");
    }
    assert_eq!(
        scheduler
            .wait(fine)
            .expect("done")
            .downcast::<u32>()
            .unwrap(),
        3
    );
    assert!(scheduler.take_history(fine).is_none(), "not asked for");

    // One that fails after ten numbers.
    let failing = scheduler
        .spawn(Fragile { sum: 0 }, Fragile::ADD, (100_u32,))
        .expect("spawned");
    for _ in 0..10 {
        scheduler.send(failing, 1_u32).expect("sent");
    }
    scheduler.send(failing, 0_u32).expect("sent");
    scheduler.wait(failing).expect_err("failed");

    let dumps = scheduler.take_flight_dumps();
    assert_eq!(dumps.len(), 1, "only the failing process");
    let dump = &dumps[0];
    assert_eq!(*hooked.lock().unwrap(), dumps, "the hook got the same");
    assert_eq!(dump.steps.len(), 3, "{dump}");
    assert!(dump.last_step() > 3 && !dump.is_complete(), "{dump}");
    assert_eq!(dump.entry, "add");
    assert!(
        matches!(&dump.outcome, Outcome::Failed(e) if e.contains("got a zero after 10")),
        "{dump}"
    );
    // The last step got the tenth tick (the numbers came earlier, all at once
    // perhaps, and waited in the process until its `recv!` took them), and yielded
    // nothing: it failed.
    let last = dump.steps.last().unwrap();
    assert!(
        matches!(
            last.events[..],
            [RecordedEvent::Completion {
                tag: 10,
                result: Ok(_)
            }]
        ),
        "{dump}"
    );
    assert!(last.yields.is_empty(), "{dump}");
    // It cannot be replayed from the entry, and says so.
    let incomplete = replay(dump, Fragile { sum: 0 }, &Codecs::new()).expect_err("incomplete");
    assert_eq!(incomplete.kind(), DivergenceKind::Incomplete);
    assert!(scheduler.take_flight_dumps().is_empty(), "taken");
    scheduler.shutdown(Duration::from_secs(5));
}

/// The saved history of a `Shop` run (see `regenerate_the_saved_history`).
fn saved_history() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/histories/shop.json")
}

#[test]
fn the_saved_history_replays() {
    let history = History::load(saved_history()).unwrap_or_else(|e| panic!("{e}"));
    let mut report = replay(&history, Shop { total: 0 }, &codecs()).unwrap_or_else(|d| {
        panic!("{d}\n(if `Shop` changed on purpose, run with WSCHED_REGENERATE_HISTORIES=1)")
    });
    assert_eq!(report.compared_by_name(), 0);
    assert_eq!(report.process().result::<String>(), "ada owes 2400");
    // And it is what it says: a changed body diverges from it too.
    let divergence = replay(&history, ShopShouting { total: 0 }, &codecs()).unwrap_err();
    assert_eq!(divergence.step(), step_yielding(&history, 3));
}

/// Writes `tests/histories/shop.json` again, from a fresh recording, when
/// `WSCHED_REGENERATE_HISTORIES` is set; otherwise checks that the file is what
/// saving its history writes (so it stays in the format `History::save` writes).
#[test]
fn regenerate_the_saved_history() {
    if std::env::var_os("WSCHED_REGENERATE_HISTORIES").is_some() {
        let scheduler = scheduler(codecs());
        let history = record_shop(&scheduler);
        history
            .save(saved_history())
            .unwrap_or_else(|e| panic!("{e}"));
        scheduler.shutdown(Duration::from_secs(5));
    }
    let text = std::fs::read_to_string(saved_history()).expect("the saved history");
    let history = History::from_json(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        history.to_json(),
        text,
        "the file is as `History::save` writes it"
    );
}
