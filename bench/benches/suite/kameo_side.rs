//! The kameo peers: each workload as a kameo user writes it. An actor is a struct
//! holding its own data, implementing `kameo::Actor` (`on_start` builds it from its
//! `Args`) and `Message<M>` once per message type it accepts; it sends with
//! `ActorRef::tell` and ends with `Context::stop` (or, for an actor nobody refers to
//! any more, by itself: a kameo actor stops when its last `ActorRef` is dropped).
//! Where the bench thread needs an answer, the actor gets a `tokio::sync::oneshot`
//! sender in its arguments and the bench thread awaits the other end.
//!
//! Mailboxes are `mailbox::unbounded()` (`spawn_with_mailbox`), as wsched's and the
//! tokio peers' are; kameo's plain `spawn` would give a bounded mailbox of 64.
//! `on_start` runs on the actor's own task. Children are spawned unlinked (no
//! supervision), as the other sides have none.
//!
//! Every run uses the same runtime as the tokio peers (`tokio_side::runtime`:
//! `worker_threads(workers)`, no I/O or time driver, which none of this needs);
//! the bench thread spawns inside the runtime's context (`Runtime::enter`), which
//! puts the actors' tasks on the injection queue as the other sides' outside spawns
//! do.

use std::sync::Arc;

use kameo::actor::{ActorRef, Spawn};
use kameo::error::Infallible;
use kameo::mailbox;
use kameo::message::{Context, Message};
use kameo::Actor;
use tokio::sync::oneshot;

use crate::harness::{check, Measured, Stopwatch};
use crate::latch::{self, Latch};
use crate::tokio_side::runtime;
use crate::wsched_side::WAIT;

/// Why an actor failed. A handler's `Err` reply to a `tell` ends the actor (kameo
/// treats it as a panic), which drops its answer's sender: the bench thread then
/// reports the run as failed.
#[derive(Debug)]
pub struct Failed(
    #[allow(
        dead_code,
        reason = "read through Debug, in kameo's report of the failure"
    )]
    String,
);

impl<M, E: std::fmt::Debug> From<kameo::error::SendError<M, E>> for Failed {
    fn from(e: kameo::error::SendError<M, E>) -> Self {
        Failed(format!("{e:?}"))
    }
}

impl From<&str> for Failed {
    fn from(e: &str) -> Self {
        Failed(e.to_string())
    }
}

type Res<T = ()> = Result<T, Failed>;

fn spawn<A: Actor>(args: A::Args) -> ActorRef<A> {
    A::spawn_with_mailbox(args, mailbox::unbounded())
}

async fn answer<T>(rx: oneshot::Receiver<T>) -> Result<T, String> {
    rx.await
        .map_err(|_| "the actor ended without answering".to_string())
}

fn reply<T>(to: &mut Option<oneshot::Sender<T>>, value: T) -> Res {
    to.take()
        .ok_or("answered twice")?
        .send(value)
        .map_err(|_| "the bench thread stopped listening")?;
    Ok(())
}

// ---------------------------------------------------------------- skynet

/// One node of the tree. A leaf reports its number from `on_start` (and, referred to
/// by nobody, stops); an inner node spawns ten children from `on_start`, adds up the
/// ten `ChildSum`s, reports and stops.
pub struct Skynet {
    parent: Option<Parent>,
    sum: u64,
    pending: u32,
}

/// Where a node reports: its parent node, or the bench thread for the root.
pub enum Parent {
    Node(ActorRef<Skynet>),
    Root(oneshot::Sender<u64>),
}

#[derive(Debug)]
pub struct ChildSum(u64);

impl Parent {
    async fn report(self, sum: u64) -> Res {
        match self {
            Parent::Node(parent) => parent.tell(ChildSum(sum)).await?,
            Parent::Root(tx) => tx.send(sum).map_err(|_| "the bench thread left")?,
        }
        Ok(())
    }
}

impl Actor for Skynet {
    type Args = (Parent, u64, u64);
    type Error = Failed;

    async fn on_start((parent, num, size): Self::Args, me: ActorRef<Self>) -> Result<Self, Failed> {
        if size == 1 {
            parent.report(num).await?;
            return Ok(Skynet {
                parent: None,
                sum: num,
                pending: 0,
            });
        }
        let child = size / 10;
        for i in 0..10 {
            spawn::<Skynet>((Parent::Node(me.clone()), num + i * child, child));
        }
        Ok(Skynet {
            parent: Some(parent),
            sum: 0,
            pending: 10,
        })
    }
}

impl Message<ChildSum> for Skynet {
    type Reply = Res;

    async fn handle(
        &mut self,
        ChildSum(sum): ChildSum,
        ctx: &mut Context<Self, Self::Reply>,
    ) -> Res {
        self.sum += sum;
        self.pending -= 1;
        if self.pending == 0 {
            self.parent
                .take()
                .ok_or("reported twice")?
                .report(self.sum)
                .await?;
            ctx.stop();
        }
        Ok(())
    }
}

pub fn skynet(workers: usize, leaves: u64) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let (tx, rx) = oneshot::channel();
    {
        let _context = rt.enter();
        spawn::<Skynet>((Parent::Root(tx), 0, leaves));
    }
    let sum = rt.block_on(answer(rx))?;
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- ping-pong

/// Spawns its `Pong` and bounces `rounds` numbers off it one at a time, adding up
/// the answers; reports the sum, stops its pong and itself.
pub struct Ping {
    pong: ActorRef<Pong>,
    rounds: u32,
    sent: u32,
    sum: u64,
    reply: Option<oneshot::Sender<u64>>,
}

#[derive(Debug)]
pub struct Answer(u32);

impl Ping {
    async fn finish(&mut self) -> Res {
        self.pong.stop_gracefully().await?;
        reply(&mut self.reply, self.sum)
    }
}

impl Actor for Ping {
    type Args = (u32, oneshot::Sender<u64>);
    type Error = Failed;

    async fn on_start((rounds, reply): Self::Args, me: ActorRef<Self>) -> Result<Self, Failed> {
        let pong = spawn::<Pong>(Pong { ping: me.clone() });
        let mut ping = Ping {
            pong,
            rounds,
            sent: 0,
            sum: 0,
            reply: Some(reply),
        };
        if rounds == 0 {
            ping.finish().await?;
            me.stop_gracefully().await?;
        } else {
            ping.pong.tell(Hit(0)).await?;
            ping.sent = 1;
        }
        Ok(ping)
    }
}

impl Message<Answer> for Ping {
    type Reply = Res;

    async fn handle(&mut self, Answer(n): Answer, ctx: &mut Context<Self, Self::Reply>) -> Res {
        self.sum += u64::from(n);
        if self.sent < self.rounds {
            self.pong.tell(Hit(self.sent)).await?;
            self.sent += 1;
        } else {
            self.finish().await?;
            ctx.stop();
        }
        Ok(())
    }
}

/// Answers `Hit(n)` with `Answer(n + 1)`.
#[derive(Actor)]
pub struct Pong {
    ping: ActorRef<Ping>,
}

#[derive(Debug)]
pub struct Hit(u32);

impl Message<Hit> for Pong {
    type Reply = Res;

    async fn handle(&mut self, Hit(n): Hit, _: &mut Context<Self, Self::Reply>) -> Res {
        self.ping.tell(Answer(n + 1)).await?;
        Ok(())
    }
}

/// `pairs` pings spawned from the bench thread, all running at once; the sum of
/// their sums.
pub fn ping_pong(workers: usize, pairs: u32, rounds: u32) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let answers: Vec<_> = {
        let _context = rt.enter();
        (0..pairs)
            .map(|_| {
                let (tx, rx) = oneshot::channel();
                spawn::<Ping>((rounds, tx));
                rx
            })
            .collect()
    };
    let sum = rt.block_on(async {
        let mut sum = 0;
        for rx in answers {
            sum += answer(rx).await?;
        }
        Ok::<_, String>(sum)
    })?;
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- spawning

/// Counts the latch down in `on_start`; referred to by nobody, it then stops.
pub struct Countdown;

impl Actor for Countdown {
    type Args = Arc<Latch>;
    type Error = Infallible;

    async fn on_start(latch: Arc<Latch>, _: ActorRef<Self>) -> Result<Self, Infallible> {
        latch.count_down();
        Ok(Countdown)
    }
}

/// Spawns `n` `Countdown`s from `on_start`, reports how many it spawned.
pub struct Spawner;

impl Actor for Spawner {
    type Args = (Arc<Latch>, u64, oneshot::Sender<u64>);
    type Error = Failed;

    async fn on_start((latch, n, reply): Self::Args, _: ActorRef<Self>) -> Result<Self, Failed> {
        let mut spawned = 0;
        for _ in 0..n {
            spawn::<Countdown>(latch.clone());
            spawned += 1;
        }
        reply
            .send(spawned)
            .map_err(|_| "the bench thread stopped listening")?;
        Ok(Spawner)
    }
}

pub fn spawn_many_outside(workers: usize, n: usize) -> Result<Measured, String> {
    let rt = runtime(workers);
    let (latch, done) = Latch::new(n);
    let clock = Stopwatch::start();
    {
        let _context = rt.enter();
        for _ in 0..n {
            spawn::<Countdown>(latch.clone());
        }
    }
    latch::wait(&done, WAIT)?;
    let m = clock.stop();
    drop(rt);
    check("count-down left", latch.left(), 0)?;
    Ok(m)
}

pub fn spawn_many_inside(workers: usize, n: usize) -> Result<Measured, String> {
    let rt = runtime(workers);
    let (latch, done) = Latch::new(n);
    let clock = Stopwatch::start();
    let (tx, rx) = oneshot::channel();
    {
        let _context = rt.enter();
        spawn::<Spawner>((latch.clone(), n as u64, tx));
    }
    latch::wait(&done, WAIT)?;
    let spawned = rt.block_on(answer(rx))?;
    let m = clock.stop();
    drop(rt);
    check("actors spawned", spawned, n as u64)?;
    check("count-down left", latch.left(), 0)?;
    Ok(m)
}

// ---------------------------------------------------------------- ring

/// A ring node: learns its successor (`Next`), then forwards each `Token` plus one;
/// after its last token it reports that token and stops. The first node receives
/// the token once more (from the last node) and keeps it.
pub struct RingNode {
    next: Option<ActorRef<RingNode>>,
    laps: u64,
    first: bool,
    seen: u64,
    reply: Option<oneshot::Sender<u64>>,
}

pub struct Next(ActorRef<RingNode>);

#[derive(Debug)]
pub struct Token(u64);

impl Actor for RingNode {
    type Args = (u64, bool, oneshot::Sender<u64>);
    type Error = Infallible;

    async fn on_start(
        (laps, first, reply): Self::Args,
        _: ActorRef<Self>,
    ) -> Result<Self, Infallible> {
        Ok(RingNode {
            next: None,
            laps,
            first,
            seen: 0,
            reply: Some(reply),
        })
    }
}

impl Message<Next> for RingNode {
    type Reply = ();

    async fn handle(&mut self, Next(next): Next, _: &mut Context<Self, ()>) {
        self.next = Some(next);
    }
}

impl Message<Token> for RingNode {
    type Reply = Res;

    async fn handle(&mut self, Token(token): Token, ctx: &mut Context<Self, Self::Reply>) -> Res {
        self.seen += 1;
        let receives = if self.first { self.laps + 1 } else { self.laps };
        if !(self.first && self.seen == receives) {
            let next = self.next.as_ref().ok_or("a token before Next")?;
            next.tell(Token(token + 1)).await?;
        }
        if self.seen == receives {
            reply(&mut self.reply, token)?;
            // The ring's references to each other would keep the nodes alive.
            self.next = None;
            ctx.stop();
        }
        Ok(())
    }
}

/// Returns the sum of every node's last token.
pub fn ring(workers: usize, nodes: usize, laps: u64) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let sum = rt.block_on(async {
        let mut refs = Vec::with_capacity(nodes);
        let mut answers = Vec::with_capacity(nodes);
        for i in 0..nodes {
            let (tx, rx) = oneshot::channel();
            refs.push(spawn::<RingNode>((laps, i == 0, tx)));
            answers.push(rx);
        }
        for (i, node) in refs.iter().enumerate() {
            node.tell(Next(refs[(i + 1) % nodes].clone()))
                .await
                .map_err(|e| format!("{e:?}"))?;
        }
        refs[0].tell(Token(0)).await.map_err(|e| e.to_string())?;
        drop(refs);
        let mut sum = 0;
        for rx in answers {
            sum += answer(rx).await?;
        }
        Ok::<_, String>(sum)
    })?;
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- fan-out / fan-in

/// Spawns `fan` workers from `on_start`, then per round tells every worker the round
/// and counts their answers; after the last round stops the workers, reports the
/// sum, stops.
pub struct Coordinator {
    workers: Vec<ActorRef<FanWorker>>,
    rounds: u64,
    round: u64,
    answers: u64,
    sum: u64,
    reply: Option<oneshot::Sender<u64>>,
}

#[derive(Debug)]
pub struct Round(u64);

#[derive(Debug)]
pub struct FanAnswer(u64);

impl Coordinator {
    async fn start_round(&self) -> Res {
        for worker in &self.workers {
            worker.tell(Round(self.round)).await?;
        }
        Ok(())
    }

    async fn finish(&mut self) -> Res {
        for worker in self.workers.drain(..) {
            worker.stop_gracefully().await?;
        }
        reply(&mut self.reply, self.sum)
    }
}

impl Actor for Coordinator {
    type Args = (u64, u64, oneshot::Sender<u64>);
    type Error = Failed;

    async fn on_start(
        (fan, rounds, reply): Self::Args,
        me: ActorRef<Self>,
    ) -> Result<Self, Failed> {
        let workers = (0..fan)
            .map(|index| {
                spawn::<FanWorker>(FanWorker {
                    coordinator: me.clone(),
                    index,
                })
            })
            .collect();
        let mut coordinator = Coordinator {
            workers,
            rounds,
            round: 0,
            answers: 0,
            sum: 0,
            reply: Some(reply),
        };
        if rounds == 0 || fan == 0 {
            coordinator.finish().await?;
            me.stop_gracefully().await?;
        } else {
            coordinator.start_round().await?;
        }
        Ok(coordinator)
    }
}

impl Message<FanAnswer> for Coordinator {
    type Reply = Res;

    async fn handle(
        &mut self,
        FanAnswer(value): FanAnswer,
        ctx: &mut Context<Self, Self::Reply>,
    ) -> Res {
        self.sum += value;
        self.answers += 1;
        if self.answers < self.workers.len() as u64 {
            return Ok(());
        }
        self.answers = 0;
        self.round += 1;
        if self.round < self.rounds {
            self.start_round().await
        } else {
            self.finish().await?;
            ctx.stop();
            Ok(())
        }
    }
}

/// Answers `Round(r)` with `FanAnswer(r + index)`.
#[derive(Actor)]
pub struct FanWorker {
    coordinator: ActorRef<Coordinator>,
    index: u64,
}

impl Message<Round> for FanWorker {
    type Reply = Res;

    async fn handle(&mut self, Round(round): Round, _: &mut Context<Self, Self::Reply>) -> Res {
        self.coordinator.tell(FanAnswer(round + self.index)).await?;
        Ok(())
    }
}

pub fn fan_out_in(workers: usize, fan: u64, rounds: u64) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let (tx, rx) = oneshot::channel();
    {
        let _context = rt.enter();
        spawn::<Coordinator>((fan, rounds, tx));
    }
    let sum = rt.block_on(answer(rx))?;
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- idle actors

/// Waits for one `u64`, which it hands to [`crate::memory::received`].
pub struct Idle;

impl Actor for Idle {
    type Args = ();
    type Error = Infallible;

    async fn on_start(_: (), _: ActorRef<Self>) -> Result<Self, Infallible> {
        crate::memory::started();
        Ok(Idle)
    }
}

impl Message<u64> for Idle {
    type Reply = ();

    async fn handle(&mut self, value: u64, _: &mut Context<Self, ()>) {
        crate::memory::received(value);
    }
}

/// Spawns one idle actor (in the runtime's context).
pub fn spawn_idle() -> ActorRef<Idle> {
    spawn::<Idle>(())
}
