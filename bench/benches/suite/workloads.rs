//! The catalogue: every workload's sizes, variants (baseline first), expected result
//! and comparisons. The sizes are the issue's; `--quick` shrinks them for a smoke run.

use std::time::Duration;

use crate::external::Tools;
use crate::harness::{check, Comparison, Measured, RunResult, Variant, Workload};
use crate::{deque, kameo_side, ractor_side, tokio_side, wsched_hand, wsched_side};

/// The peers beyond each workload's baseline: the actor frameworks (ractor, kameo:
/// in-process) and Erlang and Go (child processes, when their tools are here).
/// `--no-peers` turns them all off.
pub struct Peers {
    pub frameworks: bool,
    pub tools: Tools,
}

impl Peers {
    pub fn none() -> Self {
        Self {
            frameworks: false,
            tools: Tools::none(),
        }
    }
}

/// A workload's extra peers, collected while its variants are built.
struct Extra<'a> {
    peers: &'a Peers,
    variants: Vec<Variant>,
    skipped: Vec<(&'static str, String)>,
}

impl Extra<'_> {
    /// ractor's and kameo's forms (built only when the frameworks run).
    fn frameworks(
        &mut self,
        ractor: impl Fn() -> RunResult + 'static,
        kameo: impl Fn() -> RunResult + 'static,
    ) {
        if self.peers.frameworks {
            self.variants.push(Variant::peer("ractor", ractor));
            self.variants.push(Variant::peer("kameo", kameo));
        }
    }

    /// The Erlang and Go forms: `program` in `bench/erlang/` and `bench/go/`.
    fn outside(&mut self, program: &'static str, args: &[String], w: usize, expected: u64) {
        let erlang = self.peers.tools.erlang(program, args.to_vec(), w, expected);
        let go = self.peers.tools.go(program, args.to_vec(), w, expected);
        for (label, variant) in [("Erlang", erlang), ("Go", go)] {
            match variant {
                Ok(variant) => self.variants.push(variant),
                Err(why) if why == "--no-peers" => {}
                Err(why) => self.skipped.push((label, why)),
            }
        }
    }
}

pub struct Sizes {
    pub skynet_leaves: u64,
    pub ping_pong_rounds: u32,
    pub pairs: u32,
    pub spawn_many: usize,
    pub chain: usize,
    pub yield_tasks: usize,
    pub yield_each: u32,
    pub ring_nodes: usize,
    pub ring_laps: u64,
    pub fan: u64,
    pub fan_rounds: u64,
    pub yield_all_batches: u32,
    pub yield_all_each: u32,
    pub deque_rounds: usize,
    pub deque_batch: usize,
    pub deque_total: usize,
    pub memory: Vec<usize>,
    pub latency_samples: usize,
    pub idle: Duration,
    pub async_yield_trips: u64,
    pub tcp_conns: usize,
    pub tcp_rounds: usize,
    #[cfg(feature = "sim")]
    pub sim_rounds: u32,
    #[cfg(feature = "sim")]
    pub sim_leaves: u64,
}

impl Sizes {
    pub fn full() -> Self {
        Self {
            skynet_leaves: 1_000_000,
            ping_pong_rounds: 200_000,
            pairs: 1_000,
            spawn_many: 10_000,
            chain: 1_000,
            yield_tasks: 200,
            yield_each: 1_000,
            ring_nodes: 1_000,
            ring_laps: 100,
            fan: 1_000,
            fan_rounds: 100,
            yield_all_batches: 20,
            yield_all_each: 10_000,
            deque_rounds: 40_000,
            deque_batch: 128,
            deque_total: 2_000_000,
            memory: vec![100_000, 1_000_000],
            latency_samples: 10_000,
            idle: Duration::from_secs(2),
            async_yield_trips: 20_000,
            tcp_conns: 1_000,
            tcp_rounds: 100,
            #[cfg(feature = "sim")]
            sim_rounds: 50_000,
            #[cfg(feature = "sim")]
            sim_leaves: 10_000,
        }
    }

    pub fn quick() -> Self {
        Self {
            skynet_leaves: 10_000,
            ping_pong_rounds: 2_000,
            pairs: 100,
            spawn_many: 1_000,
            chain: 100,
            yield_tasks: 20,
            yield_each: 100,
            ring_nodes: 100,
            ring_laps: 10,
            fan: 100,
            fan_rounds: 10,
            yield_all_batches: 2,
            yield_all_each: 1_000,
            deque_rounds: 1_000,
            deque_batch: 128,
            deque_total: 50_000,
            memory: vec![10_000],
            latency_samples: 300,
            idle: Duration::from_millis(200),
            async_yield_trips: 1_000,
            tcp_conns: 100,
            tcp_rounds: 10,
            #[cfg(feature = "sim")]
            sim_rounds: 1_000,
            #[cfg(feature = "sim")]
            sim_leaves: 1_000,
        }
    }
}

/// Every workload, in the order the suite runs them: the generic ones, then the
/// deque, then the special sections (memory, latency, idle CPU, timers, async I/O,
/// the simulation: `sim_steps` needs `--features sim`).
pub const NAMES: &[&str] = &[
    "skynet",
    "skynet_detached",
    "ping_pong",
    "pairs_1000",
    "spawn_many_outside",
    "spawn_many_inside",
    "chained_spawn",
    "yield_many",
    "yield_all_vs_separate",
    "ring",
    "fan_out_in",
    "observability",
    "deque_owner",
    "deque_steal",
    "memory_idle",
    "wakeup_latency",
    "idle_cpu",
    "timer_burst",
    "timer_repeat",
    "async_yield",
    "tcp_echo",
    "sim_steps",
    "cluster_rtt",
    "cluster_throughput",
];

/// A run returning a `u64` result checked against `expected`.
fn expect(
    expected: u64,
    run: impl Fn() -> Result<(u64, Measured), String> + 'static,
) -> impl Fn() -> RunResult + 'static {
    move || {
        let (got, measured) = run()?;
        check("result", got, expected)?;
        Ok(measured)
    }
}

fn triangle(n: u64) -> u64 {
    n * n.saturating_sub(1) / 2
}

/// The generic workload called `name`, or `None` for the special sections.
pub fn workload(name: &'static str, w: usize, s: &Sizes, peers: &Peers) -> Option<Workload> {
    let mut comparisons = Vec::new();
    let mut extra = Extra {
        peers,
        variants: Vec::new(),
        skipped: Vec::new(),
    };
    let mut variants = match name {
        "skynet" => {
            let leaves = s.skynet_leaves;
            let sum = triangle(leaves);
            comparisons.push(Comparison {
                a: 1,
                b: 2,
                what: "children spawned by yield_all! of Spawn vs this::spawn",
                target: None,
            });
            extra.frameworks(
                expect(sum, move || ractor_side::skynet(w, leaves)),
                expect(sum, move || kameo_side::skynet(w, leaves)),
            );
            extra.outside("skynet", &[leaves.to_string()], w, sum);
            vec![
                Variant::peer("tokio", expect(sum, move || tokio_side::skynet(w, leaves))),
                Variant::new(
                    "#[process]",
                    expect(sum, move || {
                        wsched_side::skynet(w, wsched_side::Skynet, leaves)
                    }),
                ),
                Variant::new(
                    "#[process], this::spawn",
                    expect(sum, move || {
                        wsched_side::skynet(w, wsched_side::SkynetDirect, leaves)
                    }),
                ),
            ]
        }
        "skynet_detached" => {
            let leaves = s.skynet_leaves;
            let sum = triangle(leaves);
            vec![
                Variant::peer(
                    "tokio",
                    expect(sum, move || tokio_side::skynet_msg(w, leaves)),
                ),
                Variant::new(
                    "#[process]",
                    expect(sum, move || wsched_side::skynet_msg(w, leaves)),
                ),
            ]
        }
        "ping_pong" | "pairs_1000" => {
            let (pairs, rounds) = if name == "ping_pong" {
                (1, s.ping_pong_rounds)
            } else {
                (s.pairs, 1)
            };
            let sum = u64::from(pairs) * triangle(u64::from(rounds) + 1);
            comparisons.push(Comparison {
                a: 1,
                b: 2,
                what: "#[process] form vs hand-written",
                target: Some(1.2),
            });
            extra.frameworks(
                expect(sum, move || ractor_side::ping_pong(w, pairs, rounds)),
                expect(sum, move || kameo_side::ping_pong(w, pairs, rounds)),
            );
            if name == "ping_pong" {
                extra.outside("ping_pong", &[rounds.to_string()], w, sum);
            }
            vec![
                Variant::peer(
                    "tokio",
                    expect(sum, move || tokio_side::ping_pong(w, pairs, rounds)),
                ),
                Variant::new(
                    "#[process]",
                    expect(sum, move || {
                        wsched_side::ping_pong(w, pairs, || wsched_side::Ping, || rounds)
                    }),
                ),
                Variant::new(
                    "hand-written",
                    expect(sum, move || {
                        wsched_side::ping_pong(w, pairs, wsched_hand::HandPing::default, || rounds)
                    }),
                ),
            ]
        }
        "spawn_many_outside" => {
            let n = s.spawn_many;
            extra.frameworks(
                move || ractor_side::spawn_many_outside(w, n),
                move || kameo_side::spawn_many_outside(w, n),
            );
            vec![
                Variant::peer("tokio", move || tokio_side::spawn_many_outside(w, n)),
                Variant::new("#[process]", move || wsched_side::spawn_many_outside(w, n)),
            ]
        }
        "spawn_many_inside" => {
            let n = s.spawn_many;
            extra.frameworks(
                move || ractor_side::spawn_many_inside(w, n),
                move || kameo_side::spawn_many_inside(w, n),
            );
            vec![
                Variant::peer("tokio", move || tokio_side::spawn_many_inside(w, n)),
                Variant::new("#[process]", move || wsched_side::spawn_many_inside(w, n)),
                Variant::new("#[process], this::spawn_detached", move || {
                    wsched_side::spawn_many_inside_direct(w, n)
                }),
            ]
        }
        "chained_spawn" => {
            let n = s.chain;
            vec![
                Variant::peer("tokio", move || tokio_side::chained_spawn(w, n)),
                Variant::new("#[process]", move || wsched_side::chained_spawn(w, n)),
            ]
        }
        "yield_many" => {
            let (tasks, each) = (s.yield_tasks, s.yield_each);
            let total = tasks as u64 * u64::from(each);
            comparisons.push(Comparison {
                a: 1,
                b: 2,
                what: "#[process] form vs hand-written",
                target: Some(1.2),
            });
            vec![
                Variant::peer(
                    "tokio",
                    expect(total, move || tokio_side::yield_many(w, tasks, each)),
                ),
                Variant::new(
                    "#[process]",
                    expect(total, move || {
                        let make = || wsched_side::Yielder;
                        wsched_side::spawn_and_sum(w, tasks, make, "run", || (each,))
                    }),
                ),
                Variant::new(
                    "hand-written",
                    expect(total, move || {
                        let make = wsched_hand::HandYielder::default;
                        wsched_side::spawn_and_sum(w, tasks, make, "run", || (each,))
                    }),
                ),
                Variant::new(
                    "hand-written Continue",
                    expect(total, move || {
                        let make = wsched_hand::HandContinue::default;
                        wsched_side::spawn_and_sum(w, tasks, make, "run", || (each,))
                    }),
                ),
            ]
        }
        "yield_all_vs_separate" => {
            let (batches, each) = (s.yield_all_batches, s.yield_all_each);
            let total = u64::from(batches) * u64::from(each);
            comparisons.push(Comparison {
                a: 1,
                b: 0,
                what: "per-command cost, yield_all! vs yield_cmd!",
                target: Some(1.5),
            });
            // The same commands in batches ten times smaller: a per-command cost that
            // grows with the batch shows up as a ratio above 1.
            comparisons.push(Comparison {
                a: 1,
                b: 2,
                what: "per-command cost, batch vs batch ÷ 10",
                target: None,
            });
            let yield_all = move |batches: u32, each: u32| {
                expect(total, move || {
                    let make = || wsched_side::Yielder;
                    wsched_side::spawn_and_sum(w, 1, make, "batched", move || (batches, each))
                })
            };
            vec![
                Variant::new(
                    "separate yield_cmd!s",
                    expect(total, move || {
                        let make = || wsched_side::Yielder;
                        wsched_side::spawn_and_sum(w, 1, make, "run", move || (batches * each,))
                    }),
                ),
                Variant::new("yield_all!", yield_all(batches, each)),
                Variant::new("yield_all!, batch ÷ 10", yield_all(batches * 10, each / 10)),
            ]
        }
        "ring" => {
            let (nodes, laps) = (s.ring_nodes, s.ring_laps);
            let n = nodes as u64;
            // Node 0 ends on the last token, n * laps; node i > 0 last forwarded
            // (laps - 1) * n + i.
            let sum = n * laps + (n - 1) * (laps - 1) * n + triangle(n);
            extra.frameworks(
                expect(sum, move || ractor_side::ring(w, nodes, laps)),
                expect(sum, move || kameo_side::ring(w, nodes, laps)),
            );
            extra.outside("ring", &[nodes.to_string(), laps.to_string()], w, sum);
            vec![
                Variant::peer(
                    "tokio",
                    expect(sum, move || tokio_side::ring(w, nodes, laps)),
                ),
                Variant::new(
                    "#[process]",
                    expect(sum, move || wsched_side::ring(w, nodes, laps)),
                ),
            ]
        }
        "fan_out_in" => {
            let (fan, rounds) = (s.fan, s.fan_rounds);
            let sum = fan * triangle(rounds) + rounds * triangle(fan);
            extra.frameworks(
                expect(sum, move || ractor_side::fan_out_in(w, fan, rounds)),
                expect(sum, move || kameo_side::fan_out_in(w, fan, rounds)),
            );
            vec![
                Variant::peer(
                    "tokio",
                    expect(sum, move || tokio_side::fan_out_in(w, fan, rounds)),
                ),
                Variant::new(
                    "#[process]",
                    expect(sum, move || wsched_side::fan_out_in(w, fan, rounds)),
                ),
            ]
        }
        "observability" => {
            // What the opt-in observability costs: ping-pong with it on, against the
            // same with it off (the baseline here is wsched itself, not tokio).
            let rounds = s.ping_pong_rounds;
            let sum = triangle(u64::from(rounds) + 1);
            let ping_pong = move |configure: fn(wsched::Builder) -> wsched::Builder| {
                expect(sum, move || {
                    let s = wsched_side::scheduler_with(w, configure);
                    wsched_side::ping_pong_on(s, 1, || wsched_side::Ping, || rounds)
                })
            };
            // The issue-11 budget: recording costs at most a tenth.
            comparisons.push(Comparison {
                a: 2,
                b: 0,
                what: "the recorder's cost",
                target: Some(1.10),
            });
            vec![
                Variant::new("#[process], all off", ping_pong(|b| b)),
                Variant::new("step timing on", ping_pong(|b| b.step_timing(true))),
                Variant::new(
                    "recorder on",
                    ping_pong(|b| b.record(wsched::RecordOptions::new())),
                ),
            ]
        }
        "deque_owner" => {
            let (rounds, batch) = (s.deque_rounds, s.deque_batch);
            vec![
                Variant::peer("crossbeam-deque", move || {
                    deque::owner_crossbeam(rounds, batch)
                }),
                Variant::new("wsched deque", move || deque::owner_ours(rounds, batch)),
            ]
        }
        "deque_steal" => {
            let total = s.deque_total;
            vec![
                Variant::peer("crossbeam-deque", move || deque::steal_crossbeam(total)),
                Variant::new("wsched deque", move || deque::steal_ours(total)),
            ]
        }
        _ => return None,
    };
    // After the wsched forms: the harness divides the first form by each.
    variants.append(&mut extra.variants);
    Some(Workload {
        name,
        variants,
        comparisons,
        skipped: extra.skipped,
    })
}
