//! A realistic multi-step process: an order that is reserved, charged and shipped.
//!
//! * entries: `place` (the usual path) and `place_large` (which also waits for a
//!   manager's approval), sharing `#[suspend]` helpers;
//! * a timer: `Sleep` between payment attempts (backing off) and while packing;
//! * a retry: the payment gateway times out on a first attempt; the charge is retried
//!   up to three times before the order gives up;
//! * cancellation with cleanup: a large order cancelled while it waits for approval
//!   refunds the charge and releases the stock, then ends as cancelled.
//!
//! `cargo run --example workflow`

use std::sync::mpsc;
use std::time::Duration;

use wsched::command::Completer;
use wsched::prelude::*;
use wsched::{ExitReason, Scheduler};

/// Hold stock for an order; gives a reservation id.
struct Reserve {
    item: &'static str,
}
impl Command for Reserve {
    type Output = u64;
}

/// Give reserved stock back (cleanup).
struct Release {
    reservation: u64,
}
impl Command for Release {
    type Output = ();
}

/// Charge the customer's card; gives a receipt. `attempt` counts from 1.
struct Charge {
    card: &'static str,
    cents: u64,
    attempt: u32,
}
impl Command for Charge {
    type Output = String;
}

/// Pay a charge back (cleanup).
struct Refund {
    receipt: String,
}
impl Command for Refund {
    type Output = ();
}

/// Hand the parcel to the carrier; gives a tracking number.
struct Ship {
    reservation: u64,
}
impl Command for Ship {
    type Output = String;
}

/// Tell the outside world (here: the main thread) where an order stands.
struct Notify(String);
impl Command for Notify {
    type Output = ();
}

/// A manager's decision on a large order, sent as a message.
struct Approved;

const ATTEMPTS: u32 = 3;

struct Order {
    id: u32,
    item: &'static str,
    card: &'static str,
    cents: u64,
}

#[process]
impl Order {
    /// Reserve, charge, pack, ship.
    #[entry]
    fn place(&mut self) -> Result<String, BoxError> {
        let (reservation, receipt) = self.reserve_and_charge().await?;
        self.ship(reservation, receipt).await
    }

    // ANCHOR: cancel
    /// Like `place`, but a manager must approve before the parcel ships. Cancelled
    /// while it waits, the order undoes what it did.
    #[entry]
    fn place_large(&mut self) -> Result<String, BoxError> {
        let (reservation, receipt) = self.reserve_and_charge().await?;
        self.notify("waiting for approval").await?;
        match recv!(Approved, timeout = Duration::from_secs(3600)) {
            Ok(Approved) => self.ship(reservation, receipt).await,
            Err(e) => {
                // Cancelled (or an hour passed): suspension points after a cancel
                // work normally, so the cleanup can still yield commands.
                self.cleanup(reservation, Some(receipt)).await;
                // Passing `RecvError::Cancelled` on ends the process as
                // `Cancelled` (a timeout, as an error).
                Err(e.into())
            }
        }
    }
    // ANCHOR_END: cancel

    /// The steps both entries share. Not paid, the stock goes back before failing.
    #[suspend]
    fn reserve_and_charge(&mut self) -> Result<(u64, String), BoxError> {
        let reservation = self.reserve().await?;
        match self.charge().await {
            Ok(receipt) => Ok((reservation, receipt)),
            Err(e) => {
                self.cleanup(reservation, None).await;
                Err(e)
            }
        }
    }

    #[suspend]
    fn reserve(&mut self) -> Result<u64, BoxError> {
        let reservation = yield_cmd!(Reserve { item: self.item })?;
        self.notify(&format!(
            "reserved {} (reservation {reservation})",
            self.item
        ))
        .await?;
        Ok(reservation)
    }

    /// Charges the card, retrying a failed attempt after a growing pause.
    #[suspend]
    fn charge(&mut self) -> Result<String, BoxError> {
        let mut attempt = 1;
        loop {
            let charge = Charge {
                card: self.card,
                cents: self.cents,
                attempt,
            };
            match yield_cmd!(charge) {
                Ok(receipt) => {
                    self.notify(&format!("charged {} cents ({receipt})", self.cents))
                        .await?;
                    return Ok(receipt);
                }
                Err(YieldError::Failed { source, .. }) if attempt < ATTEMPTS => {
                    let pause = Duration::from_millis(10 << attempt);
                    self.notify(&format!(
                        "payment attempt {attempt} failed ({source}); retrying in {pause:?}"
                    ))
                    .await?;
                    yield_cmd!(Sleep(pause))?;
                    attempt += 1;
                }
                Err(e) => {
                    self.notify(&format!("payment failed for good: {e}"))
                        .await?;
                    return Err(e.into());
                }
            }
        }
    }

    #[suspend]
    fn ship(&mut self, reservation: u64, receipt: String) -> Result<String, BoxError> {
        yield_cmd!(Sleep(Duration::from_millis(20)))?; // packing takes a moment
        let tracking = yield_cmd!(Ship { reservation })?;
        self.notify(&format!("shipped, tracking {tracking}"))
            .await?;
        Ok(format!("order {} shipped ({receipt}, {tracking})", self.id))
    }

    /// Undoes a reservation and, if there is one, a charge. Best effort: a failure
    /// here is reported, not propagated, so the rest of the cleanup still runs.
    #[suspend]
    fn cleanup(&mut self, reservation: u64, receipt: Option<String>) {
        let undone = if receipt.is_some() {
            "refunded and released"
        } else {
            "released"
        };
        if let Some(receipt) = receipt {
            if let Err(e) = yield_cmd!(Refund { receipt }) {
                let _ = self.notify(&format!("refund failed: {e}")).await;
            }
        }
        if let Err(e) = yield_cmd!(Release { reservation }) {
            let _ = self.notify(&format!("release failed: {e}")).await;
        }
        let _ = self.notify(&format!("cleaned up: {undone}")).await;
    }

    #[suspend]
    fn notify(&mut self, what: &str) -> Result<(), YieldError> {
        yield_cmd!(Notify(format!("order {}: {what}", self.id)))
    }
}

/// Reads the orders' notifications until one starts with `prefix`.
/// Gives up after a while rather than hanging if the order went wrong.
fn wait_for(events: &mpsc::Receiver<String>, prefix: &str) -> Result<String, String> {
    loop {
        match events.recv_timeout(Duration::from_secs(10)) {
            Ok(line) if line.starts_with(prefix) => return Ok(line),
            Ok(_) => {}
            Err(e) => return Err(format!("no notification starting with {prefix:?}: {e}")),
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (log, events) = mpsc::channel::<String>();
    let next_id = std::sync::atomic::AtomicU64::new(1);
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(move |r: Reserve, done: Completer<Reserve>| {
            let id = next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            println!("  warehouse: holding one {} as reservation {id}", r.item);
            done.complete(id);
        })
        .handler(|r: Release, done: Completer<Release>| {
            println!("  warehouse: reservation {} released", r.reservation);
            done.complete(());
        })
        .handler(|c: Charge, done: Completer<Charge>| {
            // The simulated gateway: every card's first attempt times out, and the
            // "expired" card is always refused.
            if c.card == "expired" {
                done.fail("card expired");
            } else if c.attempt == 1 {
                done.fail("gateway timeout");
            } else {
                println!("  gateway: charged {} cents to {}", c.cents, c.card);
                done.complete(format!("receipt-{}-{}", c.card, c.cents));
            }
        })
        .handler(|r: Refund, done: Completer<Refund>| {
            println!("  gateway: refunded {}", r.receipt);
            done.complete(());
        })
        .handler(|s: Ship, done: Completer<Ship>| {
            done.complete(format!("TRACK{:04}", s.reservation));
        })
        .handler(move |Notify(line): Notify, done: Completer<Notify>| {
            // Complete first: a cancel sent by whoever reads the line then finds
            // this yield already answered, and reaches the order at its next wait.
            done.complete(());
            let _ = log.send(line.clone());
            println!("{line}");
        })
        .build()?;

    println!("== order 1: a lamp (the first payment attempt times out)");
    let lamp = Order {
        id: 1,
        item: "lamp",
        card: "visa-4242",
        cents: 2_500,
    };
    let pid = scheduler.spawn(lamp, "place", ())?;
    println!("result: {}", scheduler.wait(pid)?.downcast::<String>()?);

    println!("\n== order 2: a sofa, with an expired card");
    let sofa = Order {
        id: 2,
        item: "sofa",
        card: "expired",
        cents: 90_000,
    };
    let pid = scheduler.spawn(sofa, "place", ())?;
    let err = scheduler.wait(pid).unwrap_err();
    println!("result: {err}");

    println!("\n== order 3: a piano, approved by a manager");
    let piano = Order {
        id: 3,
        item: "piano",
        card: "visa-4242",
        cents: 1_200_000,
    };
    let pid = scheduler.spawn(piano, "place_large", ())?;
    wait_for(&events, "order 3: waiting")?;
    scheduler.send(pid, Approved)?;
    println!("result: {}", scheduler.wait(pid)?.downcast::<String>()?);

    println!("\n== order 4: a harp, cancelled while it waits for approval");
    let harp = Order {
        id: 4,
        item: "harp",
        card: "visa-4242",
        cents: 450_000,
    };
    let pid = scheduler.spawn(harp, "place_large", ())?;
    // Cancel once the order says it waits (no sleeping and hoping).
    wait_for(&events, "order 4: waiting")?;
    scheduler.cancel(pid)?;
    let err = scheduler.wait(pid).unwrap_err();
    let reason = err.exit_reason().ok_or("no exit reason")?;
    assert_eq!(reason, ExitReason::Cancelled);
    println!("result: {reason}");

    scheduler.shutdown(Duration::from_secs(1));
    Ok(())
}
