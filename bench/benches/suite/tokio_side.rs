//! The tokio peers: the fairest equivalent of each wsched workload, written as a tokio
//! user would. Processes are tasks; a mailbox is an `mpsc::unbounded_channel` (wsched
//! mailboxes are unbounded too); a `Join` is awaiting a `JoinHandle`; a detached spawn
//! drops its `JoinHandle`. `yield_now` appears only where the wsched side gives the
//! worker back (yield_many).
//!
//! Every run builds a fresh multi-thread runtime with `worker_threads(workers)` and no
//! I/O or time driver (the workloads need neither, and the wsched scheduler has none),
//! spawns from the bench thread with `Runtime::spawn` (the injection queue, as wsched's
//! outside `spawn` uses its global queue), waits with `block_on` on the root task's
//! `JoinHandle`, and drops the runtime untimed.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::runtime::{Builder, Runtime};
use tokio::sync::mpsc::{unbounded_channel, Receiver, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

use crate::harness::{Measured, Stopwatch};
use crate::latch::{self, Latch};
use crate::wsched_side::WAIT;

pub fn runtime(workers: usize) -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .expect("the runtime starts")
}

fn join<T>(rt: &Runtime, handle: JoinHandle<T>) -> Result<T, String> {
    rt.block_on(handle).map_err(|e| format!("task: {e}"))
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

// ---------------------------------------------------------------- skynet

/// Spawns ten children, awaits their `JoinHandle`s, returns the sum. Boxed because
/// the future spawns itself.
fn skynet_task(num: u64, size: u64) -> BoxFuture<u64> {
    Box::pin(async move {
        if size == 1 {
            return num;
        }
        let child = size / 10;
        let handles: Vec<JoinHandle<u64>> = (0..10)
            .map(|i| tokio::spawn(skynet_task(num + i * child, child)))
            .collect();
        let mut sum = 0;
        for handle in handles {
            sum += handle.await.expect("child task");
        }
        sum
    })
}

/// Children spawned detached, each sending its sum on its parent's channel.
fn skynet_msg_task(parent: Option<UnboundedSender<u64>>, num: u64, size: u64) -> BoxFuture<u64> {
    Box::pin(async move {
        let sum = if size == 1 {
            num
        } else {
            let child = size / 10;
            let (tx, mut rx) = unbounded_channel();
            for i in 0..10 {
                drop(tokio::spawn(skynet_msg_task(
                    Some(tx.clone()),
                    num + i * child,
                    child,
                )));
            }
            drop(tx);
            let mut sum = 0;
            for _ in 0..10 {
                sum += rx.recv().await.expect("a child's sum");
            }
            sum
        };
        if let Some(parent) = parent {
            parent.send(sum).expect("the parent listens");
        }
        sum
    })
}

pub fn skynet(workers: usize, leaves: u64) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let root = rt.spawn(skynet_task(0, leaves));
    let sum = join(&rt, root)?;
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

pub fn skynet_msg(workers: usize, leaves: u64) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let root = rt.spawn(skynet_msg_task(None, 0, leaves));
    let sum = join(&rt, root)?;
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- ping-pong

async fn ping(rounds: u32) -> u64 {
    let (to_pong, pong_inbox) = unbounded_channel();
    let (to_ping, mut inbox) = unbounded_channel();
    drop(tokio::spawn(pong(pong_inbox, to_ping)));
    let mut sum = 0;
    for i in 0..rounds {
        to_pong.send(i).expect("pong listens");
        sum += u64::from(inbox.recv().await.expect("pong answers"));
    }
    to_pong.send(u32::MAX).expect("pong listens");
    sum
}

async fn pong(mut inbox: UnboundedReceiver<u32>, to_ping: UnboundedSender<u32>) {
    while let Some(n) = inbox.recv().await {
        if n == u32::MAX {
            return;
        }
        to_ping.send(n + 1).expect("ping listens");
    }
}

pub fn ping_pong(workers: usize, pairs: u32, rounds: u32) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let pings: Vec<_> = (0..pairs).map(|_| rt.spawn(ping(rounds))).collect();
    let mut sum = 0;
    for handle in pings {
        sum += join(&rt, handle)?;
    }
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- spawning

pub fn spawn_many_outside(workers: usize, n: usize) -> Result<Measured, String> {
    let rt = runtime(workers);
    let (latch, done) = Latch::new(n);
    let clock = Stopwatch::start();
    for _ in 0..n {
        let latch = latch.clone();
        drop(rt.spawn(async move { latch.count_down() }));
    }
    latch::wait(&done, WAIT)?;
    let m = clock.stop();
    drop(rt);
    crate::harness::check("count-down left", latch.left(), 0)?;
    Ok(m)
}

pub fn spawn_many_inside(workers: usize, n: usize) -> Result<Measured, String> {
    let rt = runtime(workers);
    let (latch, done) = Latch::new(n);
    let clock = Stopwatch::start();
    let spawner_latch = latch.clone();
    let spawner = rt.spawn(async move {
        let mut spawned = 0_u64;
        for _ in 0..n {
            let latch = spawner_latch.clone();
            drop(tokio::spawn(async move { latch.count_down() }));
            spawned += 1;
        }
        spawned
    });
    latch::wait(&done, WAIT)?;
    let spawned = join(&rt, spawner)?;
    let m = clock.stop();
    drop(rt);
    crate::harness::check("tasks spawned", spawned, n as u64)?;
    crate::harness::check("count-down left", latch.left(), 0)?;
    Ok(m)
}

/// tokio's own `chained_spawn` benchmark shape.
fn chain(latch: Arc<Latch>, left: usize) {
    if left == 0 {
        latch.count_down();
    } else {
        drop(tokio::spawn(async move { chain(latch, left - 1) }));
    }
}

pub fn chained_spawn(workers: usize, n: usize) -> Result<Measured, String> {
    let rt = runtime(workers);
    let (latch, done) = Latch::new(1);
    let clock = Stopwatch::start();
    let first = latch.clone();
    drop(rt.spawn(async move { chain(first, n) }));
    latch::wait(&done, WAIT)?;
    let m = clock.stop();
    drop(rt);
    crate::harness::check("count-down left", latch.left(), 0)?;
    Ok(m)
}

// ---------------------------------------------------------------- yielding

pub fn yield_many(workers: usize, tasks: usize, n: u32) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            rt.spawn(async move {
                let mut done = 0_u64;
                for _ in 0..n {
                    tokio::task::yield_now().await;
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut sum = 0;
    for handle in handles {
        sum += join(&rt, handle)?;
    }
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- ring

async fn ring_node(
    mut inbox: UnboundedReceiver<u64>,
    next: UnboundedSender<u64>,
    laps: u64,
    first: bool,
) -> u64 {
    let receives = if first { laps + 1 } else { laps };
    let mut last = 0;
    for lap in 0..receives {
        last = inbox.recv().await.expect("the token comes around");
        if !(first && lap == laps) {
            next.send(last + 1).expect("the next node listens");
        }
    }
    last
}

pub fn ring(workers: usize, nodes: usize, laps: u64) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let (senders, inboxes): (Vec<_>, Vec<_>) = (0..nodes).map(|_| unbounded_channel()).unzip();
    let handles: Vec<_> = inboxes
        .into_iter()
        .enumerate()
        .map(|(i, inbox)| {
            let next = senders[(i + 1) % nodes].clone();
            rt.spawn(ring_node(inbox, next, laps, i == 0))
        })
        .collect();
    senders[0].send(0).map_err(|e| e.to_string())?;
    drop(senders);
    let mut sum = 0;
    for handle in handles {
        sum += join(&rt, handle)?;
    }
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- fan-out / fan-in

async fn coordinator(workers: u64, rounds: u64) -> u64 {
    let (to_me, mut inbox) = unbounded_channel::<u64>();
    let mut to_workers = Vec::with_capacity(workers as usize);
    for index in 0..workers {
        let (tx, worker_inbox) = unbounded_channel::<u64>();
        drop(tokio::spawn(fan_worker(worker_inbox, to_me.clone(), index)));
        to_workers.push(tx);
    }
    let mut sum = 0;
    for round in 0..rounds {
        for worker in &to_workers {
            worker.send(round).expect("the worker listens");
        }
        for _ in 0..workers {
            sum += inbox.recv().await.expect("a worker answers");
        }
    }
    for worker in &to_workers {
        worker.send(u64::MAX).expect("the worker listens");
    }
    sum
}

async fn fan_worker(
    mut inbox: UnboundedReceiver<u64>,
    coordinator: UnboundedSender<u64>,
    index: u64,
) {
    while let Some(round) = inbox.recv().await {
        if round == u64::MAX {
            return;
        }
        coordinator
            .send(round + index)
            .expect("the coordinator listens");
    }
}

pub fn fan_out_in(workers: usize, fan: u64, rounds: u64) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let root = rt.spawn(coordinator(fan, rounds));
    let sum = join(&rt, root)?;
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- wake-up latency

/// Receives `samples` `Instant`s and records how long each took to arrive.
pub async fn latency_sink(
    mut inbox: UnboundedReceiver<Instant>,
    ack: Arc<AtomicUsize>,
    samples: u64,
) -> Vec<u64> {
    let mut latencies = Vec::with_capacity(samples as usize);
    for _ in 0..samples {
        let sent = inbox.recv().await.expect("a sample");
        latencies.push(sent.elapsed().as_nanos() as u64);
        ack.fetch_add(1, Ordering::Release);
    }
    latencies
}

// ---------------------------------------------------------------- idle tasks

/// Waits on its channel for one `u64`, which it hands to [`crate::memory::received`].
pub async fn idle_task(mut inbox: UnboundedReceiver<u64>) {
    crate::memory::started();
    if let Some(value) = inbox.recv().await {
        crate::memory::received(value);
    }
}

/// [`idle_task`] on a bounded channel.
pub async fn idle_task_bounded(mut inbox: Receiver<u64>) {
    crate::memory::started();
    if let Some(value) = inbox.recv().await {
        crate::memory::received(value);
    }
}
