//! The ractor peers: each workload as a ractor user writes it. An actor is a unit
//! struct implementing `ractor::Actor` with a typed message enum (`type Msg`), its
//! data in `type State` built by `pre_start`; it reacts to one message at a time in
//! `handle`, sends with `ActorRef::cast` and ends with `myself.stop(None)`. Where
//! the bench thread needs an answer, the actor gets an `RpcReplyPort` in its
//! arguments (ractor's reply channel, what `call!` uses) and the bench thread awaits
//! the other end.
//!
//! `Actor::spawn` runs the new actor's `pre_start` on the spawning task before it
//! starts the actor's own task, so work that must happen *in* the actor (spawning
//! children, counting a latch down) is in `post_start`, which runs on the actor's
//! task. Children are spawned unlinked (no supervision), as the other sides have
//! none. ractor mailboxes are unbounded, as wsched's are.
//!
//! Every run uses the same runtime as the tokio peers (`tokio_side::runtime`:
//! `worker_threads(workers)`, no I/O or time driver, which none of this needs) and
//! spawns from the bench thread inside `Runtime::block_on` (ractor's spawn is async),
//! which puts the actors' tasks on the injection queue as the other sides' outside
//! spawns do.

use std::sync::Arc;

use ractor::concurrency::{oneshot, OneshotReceiver};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::harness::{check, Measured, Stopwatch};
use crate::latch::{self, Latch};
use crate::tokio_side::runtime;
use crate::wsched_side::WAIT;

type Res<T> = Result<T, ActorProcessingErr>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A reply port and the bench thread's end of it.
fn reply_port<T>() -> (RpcReplyPort<T>, OneshotReceiver<T>) {
    let (tx, rx) = oneshot();
    (tx.into(), rx)
}

async fn answer<T>(rx: OneshotReceiver<T>) -> Result<T, String> {
    rx.await
        .map_err(|_| "the actor ended without answering".to_string())
}

// ---------------------------------------------------------------- skynet

/// One node of the tree. A leaf reports its number and stops; an inner node spawns
/// ten children, adds up the ten `ChildSum`s they send, reports and stops.
pub struct Skynet;

pub enum SkynetMsg {
    ChildSum(u64),
}

/// Where a node reports: its parent node, or the bench thread for the root.
pub enum Parent {
    Node(ActorRef<SkynetMsg>),
    Root(RpcReplyPort<u64>),
}

impl Parent {
    fn report(self, sum: u64) -> Res<()> {
        match self {
            Parent::Node(parent) => parent.cast(SkynetMsg::ChildSum(sum))?,
            Parent::Root(port) => port.send(sum)?,
        }
        Ok(())
    }
}

pub struct SkynetState {
    parent: Option<Parent>,
    num: u64,
    size: u64,
    sum: u64,
    pending: u32,
}

impl Actor for Skynet {
    type Msg = SkynetMsg;
    type State = SkynetState;
    type Arguments = (Parent, u64, u64);

    async fn pre_start(
        &self,
        _myself: ActorRef<SkynetMsg>,
        (parent, num, size): (Parent, u64, u64),
    ) -> Res<SkynetState> {
        Ok(SkynetState {
            parent: Some(parent),
            num,
            size,
            sum: 0,
            pending: 10,
        })
    }

    async fn post_start(&self, myself: ActorRef<SkynetMsg>, state: &mut SkynetState) -> Res<()> {
        if state.size == 1 {
            state
                .parent
                .take()
                .ok_or("reported twice")?
                .report(state.num)?;
            myself.stop(None);
            return Ok(());
        }
        let child = state.size / 10;
        for i in 0..10 {
            let args = (Parent::Node(myself.clone()), state.num + i * child, child);
            Actor::spawn(None, Skynet, args).await?;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SkynetMsg>,
        SkynetMsg::ChildSum(sum): SkynetMsg,
        state: &mut SkynetState,
    ) -> Res<()> {
        state.sum += sum;
        state.pending -= 1;
        if state.pending == 0 {
            state
                .parent
                .take()
                .ok_or("reported twice")?
                .report(state.sum)?;
            myself.stop(None);
        }
        Ok(())
    }
}

pub fn skynet(workers: usize, leaves: u64) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let sum = rt.block_on(async {
        let (port, rx) = reply_port();
        Actor::spawn(None, Skynet, (Parent::Root(port), 0, leaves))
            .await
            .map_err(err)?;
        answer(rx).await
    })?;
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- ping-pong

/// Spawns its `Pong`, then bounces `rounds` numbers off it one at a time, adding up
/// the answers; reports the sum, stops its pong and itself.
pub struct Ping;

pub enum PingMsg {
    Answer(u32),
}

pub struct PingState {
    pong: Option<ActorRef<PongMsg>>,
    rounds: u32,
    sent: u32,
    sum: u64,
    reply: Option<RpcReplyPort<u64>>,
}

impl Actor for Ping {
    type Msg = PingMsg;
    type State = PingState;
    type Arguments = (u32, RpcReplyPort<u64>);

    async fn pre_start(
        &self,
        _myself: ActorRef<PingMsg>,
        (rounds, reply): (u32, RpcReplyPort<u64>),
    ) -> Res<PingState> {
        Ok(PingState {
            pong: None,
            rounds,
            sent: 0,
            sum: 0,
            reply: Some(reply),
        })
    }

    async fn post_start(&self, myself: ActorRef<PingMsg>, state: &mut PingState) -> Res<()> {
        let (pong, _) = Actor::spawn(None, Pong, myself.clone()).await?;
        if state.rounds == 0 {
            return Self::finish(&myself, pong, state);
        }
        pong.cast(PongMsg::Hit(0))?;
        state.sent = 1;
        state.pong = Some(pong);
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<PingMsg>,
        PingMsg::Answer(n): PingMsg,
        state: &mut PingState,
    ) -> Res<()> {
        state.sum += u64::from(n);
        let pong = state.pong.as_ref().ok_or("no pong")?;
        if state.sent < state.rounds {
            pong.cast(PongMsg::Hit(state.sent))?;
            state.sent += 1;
            Ok(())
        } else {
            let pong = state.pong.take().ok_or("no pong")?;
            Self::finish(&myself, pong, state)
        }
    }
}

impl Ping {
    fn finish(
        myself: &ActorRef<PingMsg>,
        pong: ActorRef<PongMsg>,
        state: &mut PingState,
    ) -> Res<()> {
        pong.stop(None);
        state
            .reply
            .take()
            .ok_or("answered twice")?
            .send(state.sum)?;
        myself.stop(None);
        Ok(())
    }
}

/// Answers `Hit(n)` with `Answer(n + 1)`.
pub struct Pong;

pub enum PongMsg {
    Hit(u32),
}

impl Actor for Pong {
    type Msg = PongMsg;
    type State = ActorRef<PingMsg>;
    type Arguments = ActorRef<PingMsg>;

    async fn pre_start(
        &self,
        _myself: ActorRef<PongMsg>,
        ping: ActorRef<PingMsg>,
    ) -> Res<ActorRef<PingMsg>> {
        Ok(ping)
    }

    async fn handle(
        &self,
        _myself: ActorRef<PongMsg>,
        PongMsg::Hit(n): PongMsg,
        ping: &mut ActorRef<PingMsg>,
    ) -> Res<()> {
        ping.cast(PingMsg::Answer(n + 1))?;
        Ok(())
    }
}

/// `pairs` pings spawned from the bench thread, all running at once; the sum of
/// their sums.
pub fn ping_pong(workers: usize, pairs: u32, rounds: u32) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let sum = rt.block_on(async {
        let mut answers = Vec::with_capacity(pairs as usize);
        for _ in 0..pairs {
            let (port, rx) = reply_port();
            Actor::spawn(None, Ping, (rounds, port))
                .await
                .map_err(err)?;
            answers.push(rx);
        }
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

/// Counts the latch down on its own task (`post_start`) and stops.
pub struct Countdown;

impl Actor for Countdown {
    type Msg = ();
    type State = Arc<Latch>;
    type Arguments = Arc<Latch>;

    async fn pre_start(&self, _myself: ActorRef<()>, latch: Arc<Latch>) -> Res<Arc<Latch>> {
        Ok(latch)
    }

    async fn post_start(&self, myself: ActorRef<()>, latch: &mut Arc<Latch>) -> Res<()> {
        latch.count_down();
        myself.stop(None);
        Ok(())
    }
}

/// Spawns `n` `Countdown`s from its own task, reports how many it spawned, stops.
pub struct Spawner;

impl Actor for Spawner {
    type Msg = ();
    type State = (Arc<Latch>, u64, Option<RpcReplyPort<u64>>);
    type Arguments = (Arc<Latch>, u64, RpcReplyPort<u64>);

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        (latch, n, reply): (Arc<Latch>, u64, RpcReplyPort<u64>),
    ) -> Res<Self::State> {
        Ok((latch, n, Some(reply)))
    }

    async fn post_start(&self, myself: ActorRef<()>, state: &mut Self::State) -> Res<()> {
        let (latch, n, reply) = state;
        let mut spawned = 0;
        for _ in 0..*n {
            Actor::spawn(None, Countdown, latch.clone()).await?;
            spawned += 1;
        }
        reply.take().ok_or("answered twice")?.send(spawned)?;
        myself.stop(None);
        Ok(())
    }
}

pub fn spawn_many_outside(workers: usize, n: usize) -> Result<Measured, String> {
    let rt = runtime(workers);
    let (latch, done) = Latch::new(n);
    let clock = Stopwatch::start();
    rt.block_on(async {
        for _ in 0..n {
            Actor::spawn(None, Countdown, latch.clone())
                .await
                .map_err(err)?;
        }
        Ok::<_, String>(())
    })?;
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
    let rx = rt.block_on(async {
        let (port, rx) = reply_port();
        Actor::spawn(None, Spawner, (latch.clone(), n as u64, port))
            .await
            .map_err(err)?;
        Ok::<_, String>(rx)
    })?;
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
pub struct RingNode;

pub enum RingMsg {
    Next(ActorRef<RingMsg>),
    Token(u64),
}

pub struct RingState {
    next: Option<ActorRef<RingMsg>>,
    laps: u64,
    first: bool,
    seen: u64,
    reply: Option<RpcReplyPort<u64>>,
}

impl Actor for RingNode {
    type Msg = RingMsg;
    type State = RingState;
    type Arguments = (u64, bool, RpcReplyPort<u64>);

    async fn pre_start(
        &self,
        _myself: ActorRef<RingMsg>,
        (laps, first, reply): (u64, bool, RpcReplyPort<u64>),
    ) -> Res<RingState> {
        Ok(RingState {
            next: None,
            laps,
            first,
            seen: 0,
            reply: Some(reply),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<RingMsg>,
        message: RingMsg,
        state: &mut RingState,
    ) -> Res<()> {
        match message {
            RingMsg::Next(next) => state.next = Some(next),
            RingMsg::Token(token) => {
                state.seen += 1;
                let receives = if state.first {
                    state.laps + 1
                } else {
                    state.laps
                };
                if !(state.first && state.seen == receives) {
                    let next = state.next.as_ref().ok_or("a token before Next")?;
                    next.cast(RingMsg::Token(token + 1))?;
                }
                if state.seen == receives {
                    state.reply.take().ok_or("answered twice")?.send(token)?;
                    myself.stop(None);
                }
            }
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
            let (port, rx) = reply_port();
            let (node, _) = Actor::spawn(None, RingNode, (laps, i == 0, port))
                .await
                .map_err(err)?;
            refs.push(node);
            answers.push(rx);
        }
        for (i, node) in refs.iter().enumerate() {
            node.cast(RingMsg::Next(refs[(i + 1) % nodes].clone()))
                .map_err(err)?;
        }
        refs[0].cast(RingMsg::Token(0)).map_err(err)?;
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

/// Spawns `fan` workers, then per round casts the round to every worker and counts
/// their answers; after the last round stops the workers, reports the sum, stops.
pub struct Coordinator;

pub enum CoordinatorMsg {
    Answer(u64),
}

pub struct CoordinatorState {
    workers: Vec<ActorRef<WorkerMsg>>,
    fan: u64,
    rounds: u64,
    round: u64,
    answers: u64,
    sum: u64,
    reply: Option<RpcReplyPort<u64>>,
}

impl CoordinatorState {
    fn start_round(&self) -> Res<()> {
        for worker in &self.workers {
            worker.cast(WorkerMsg::Round(self.round))?;
        }
        Ok(())
    }

    fn finish(&mut self, myself: &ActorRef<CoordinatorMsg>) -> Res<()> {
        for worker in self.workers.drain(..) {
            worker.stop(None);
        }
        self.reply.take().ok_or("answered twice")?.send(self.sum)?;
        myself.stop(None);
        Ok(())
    }
}

impl Actor for Coordinator {
    type Msg = CoordinatorMsg;
    type State = CoordinatorState;
    type Arguments = (u64, u64, RpcReplyPort<u64>);

    async fn pre_start(
        &self,
        _myself: ActorRef<CoordinatorMsg>,
        (fan, rounds, reply): (u64, u64, RpcReplyPort<u64>),
    ) -> Res<CoordinatorState> {
        Ok(CoordinatorState {
            workers: Vec::with_capacity(fan as usize),
            fan,
            rounds,
            round: 0,
            answers: 0,
            sum: 0,
            reply: Some(reply),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<CoordinatorMsg>,
        state: &mut CoordinatorState,
    ) -> Res<()> {
        for index in 0..state.fan {
            let (worker, _) = Actor::spawn(None, FanWorker, (myself.clone(), index)).await?;
            state.workers.push(worker);
        }
        if state.rounds == 0 || state.fan == 0 {
            return state.finish(&myself);
        }
        state.start_round()
    }

    async fn handle(
        &self,
        myself: ActorRef<CoordinatorMsg>,
        CoordinatorMsg::Answer(value): CoordinatorMsg,
        state: &mut CoordinatorState,
    ) -> Res<()> {
        state.sum += value;
        state.answers += 1;
        if state.answers < state.fan {
            return Ok(());
        }
        state.answers = 0;
        state.round += 1;
        if state.round < state.rounds {
            state.start_round()
        } else {
            state.finish(&myself)
        }
    }
}

/// Answers `Round(r)` with `Answer(r + index)`.
pub struct FanWorker;

pub enum WorkerMsg {
    Round(u64),
}

impl Actor for FanWorker {
    type Msg = WorkerMsg;
    type State = (ActorRef<CoordinatorMsg>, u64);
    type Arguments = (ActorRef<CoordinatorMsg>, u64);

    async fn pre_start(
        &self,
        _myself: ActorRef<WorkerMsg>,
        args: (ActorRef<CoordinatorMsg>, u64),
    ) -> Res<Self::State> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<WorkerMsg>,
        WorkerMsg::Round(round): WorkerMsg,
        (coordinator, index): &mut Self::State,
    ) -> Res<()> {
        coordinator.cast(CoordinatorMsg::Answer(round + *index))?;
        Ok(())
    }
}

pub fn fan_out_in(workers: usize, fan: u64, rounds: u64) -> Result<(u64, Measured), String> {
    let rt = runtime(workers);
    let clock = Stopwatch::start();
    let sum = rt.block_on(async {
        let (port, rx) = reply_port();
        Actor::spawn(None, Coordinator, (fan, rounds, port))
            .await
            .map_err(err)?;
        answer(rx).await
    })?;
    let m = clock.stop();
    drop(rt);
    Ok((sum, m))
}

// ---------------------------------------------------------------- idle actors

/// Waits for one `u64`, which it hands to [`crate::memory::received`].
pub struct Idle;

impl Actor for Idle {
    type Msg = u64;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _myself: ActorRef<u64>, _: ()) -> Res<()> {
        Ok(())
    }

    async fn post_start(&self, _myself: ActorRef<u64>, _: &mut ()) -> Res<()> {
        crate::memory::started();
        Ok(())
    }

    async fn handle(&self, _myself: ActorRef<u64>, value: u64, _: &mut ()) -> Res<()> {
        crate::memory::received(value);
        Ok(())
    }
}
