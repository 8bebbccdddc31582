//! `tcp_echo` (issue 23): a 64-byte echo
//! over loopback with 1,000 concurrent connections, wsched's process-per-connection
//! server against tokio's task-per-connection one.
//!
//! * **wsched**: a [`Listener`] spawns an [`EchoConn`] process per connection, which
//!   loops: `conn.active_once()` (read one chunk), `recv!(TcpEvent)`, and
//!   `yield_cmd!(conn.write(bytes))` of what came, until the peer closes.
//! * **tokio**: an accept loop spawning a task per connection that reads into a
//!   buffer and `write_all`s it back (tokio's own echo example).
//! * **The load generator** is a tokio runtime of its own ([`CLIENT_THREADS`]
//!   threads), built once for the case. Each run connects every client (untimed),
//!   waits until the server has accepted them all, then starts the clock and lets
//!   each connection do a fixed number of round trips: write 64 bytes (its number
//!   and the round's, then a pattern), read 64 back, check they are the same,
//!   record the round trip's latency. The clock stops when the last connection is
//!   done; throughput is round trips ÷ that time, p50 and p99 are over every round
//!   trip of the run. The clients then close, and the server must see every
//!   connection close before it is shut down (untimed).
//!
//! The servers get the same thread budget: tokio `--workers` worker threads; wsched
//! half of them as workers and the rest as I/O threads (1 + 1 for the default 2),
//! since its sockets wait on the I/O runtime and its processes step on the workers.
//! A third variant is wsched with the scheduler's defaults (`--workers` workers and
//! its default I/O threads), informative only. Runs of the variants are interleaved
//! (forward, then backward), after one untimed warm-up run of each; the ratios are
//! medians of the per-repetition ratios wsched ÷ tokio.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use wsched::io::tcp::{Listener, TcpConn, TcpEvent};
use wsched::prelude::*;
use wsched::Scheduler;

use crate::harness::{fmt_secs, median, percentile, Measured, Report, Stopwatch};
use crate::wsched_side::WAIT;

/// The size of every request and response.
pub const MESSAGE: usize = 64;

/// Threads of the load generator's runtime.
pub const CLIENT_THREADS: usize = 2;

/// Connections made at once while connecting (below the listen backlog).
const CONNECT_BATCH: usize = 100;

/// How long a server may take to accept every client or see every one close.
const SETTLE: Duration = Duration::from_secs(30);

/// Connections a server accepted, and those still open.
#[derive(Default)]
pub struct Conns {
    accepted: AtomicUsize,
    open: AtomicUsize,
}

impl Conns {
    /// Counts one more connection, open until the guard is dropped.
    fn accept(self: &Arc<Self>) -> Open {
        self.accepted.fetch_add(1, Ordering::AcqRel);
        self.open.fetch_add(1, Ordering::AcqRel);
        Open(self.clone())
    }

    /// Waits until `done` holds of the counts, or fails after [`SETTLE`].
    fn settle(&self, what: &str, done: impl Fn(usize, usize) -> bool) -> Result<(), String> {
        let deadline = Instant::now() + SETTLE;
        loop {
            let (accepted, open) = (
                self.accepted.load(Ordering::Acquire),
                self.open.load(Ordering::Acquire),
            );
            if done(accepted, open) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{what}: after {SETTLE:?}, {accepted} connections accepted, {open} open"
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// One open connection of a server, closed when dropped.
pub struct Open(Arc<Conns>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

// ---------------------------------------------------------------- wsched

/// One connection of the wsched server: echoes every chunk until the peer closes.
pub struct EchoConn {
    _open: Open,
}

#[process]
impl EchoConn {
    #[entry]
    fn serve(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        loop {
            conn.active_once();
            match recv!(TcpEvent)? {
                TcpEvent::Data { bytes, .. } => yield_cmd!(conn.write(bytes))?,
                TcpEvent::Closed { .. } => return Ok(()),
                TcpEvent::Error { error, .. } => return Err(error.into()),
            }
        }
    }
}

// ---------------------------------------------------------------- tokio

/// One connection of the tokio server.
async fn tokio_echo(mut stream: TcpStream, _open: Open) {
    let mut buf = vec![0; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

// ---------------------------------------------------------------- the servers

enum Running {
    Wsched {
        scheduler: Scheduler,
        listener: Listener,
    },
    Tokio(Runtime),
}

/// A server listening on loopback.
pub struct Server {
    addr: SocketAddr,
    conns: Arc<Conns>,
    running: Running,
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

impl Server {
    /// wsched with `workers` workers and `io_threads` I/O threads (`None`: its
    /// default).
    pub fn wsched(workers: usize, io_threads: Option<usize>) -> Result<Self, String> {
        let mut builder = Scheduler::builder().workers(workers);
        if let Some(io) = io_threads {
            builder = builder.io_threads(io);
        }
        let scheduler = builder.build().map_err(|e| e.to_string())?;
        let conns = Arc::new(Conns::default());
        let counts = conns.clone();
        let listener = Listener::bind(
            &scheduler.handle(),
            loopback(),
            move |_peer: SocketAddr| EchoConn {
                _open: counts.accept(),
            },
            EchoConn::SERVE,
        )
        .map_err(|e| format!("bind: {e}"))?;
        let addr = listener.local_addr();
        Ok(Self {
            addr,
            conns,
            running: Running::Wsched {
                scheduler,
                listener,
            },
        })
    }

    /// tokio with `threads` worker threads.
    pub fn tokio(threads: usize) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let listener = runtime
            .block_on(TcpListener::bind(loopback()))
            .map_err(|e| format!("bind: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let conns = Arc::new(Conns::default());
        let counts = conns.clone();
        drop(runtime.spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => drop(tokio::spawn(tokio_echo(stream, counts.accept()))),
                    Err(e) => {
                        eprintln!("tokio echo server: accept: {e}");
                        return;
                    }
                }
            }
        }));
        Ok(Self {
            addr,
            conns,
            running: Running::Tokio(runtime),
        })
    }

    /// Waits for every connection to close, then shuts the server down.
    fn stop(self) -> Result<(), String> {
        let closed = self
            .conns
            .settle("closing", |_, open| open == 0)
            .map_err(|e| format!("server: {e}"));
        match self.running {
            Running::Wsched {
                scheduler,
                listener,
            } => {
                drop(listener);
                let report = scheduler.shutdown(Duration::from_secs(10));
                closed?;
                if !report.stopped.is_empty() {
                    return Err(format!(
                        "{} processes were still live at shutdown",
                        report.stopped.len()
                    ));
                }
            }
            Running::Tokio(runtime) => {
                runtime.shutdown_timeout(Duration::from_secs(10));
                closed?;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- the load

/// The load generator's runtime.
pub fn client_runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(CLIENT_THREADS)
        .thread_name("tcp-echo-client")
        .enable_all()
        .build()
        .expect("the client runtime starts")
}

/// Connects `n` clients to `addr`, [`CONNECT_BATCH`] at a time.
async fn connect_all(addr: SocketAddr, n: usize) -> io::Result<Vec<TcpStream>> {
    let mut streams = Vec::with_capacity(n);
    while streams.len() < n {
        let batch = CONNECT_BATCH.min(n - streams.len());
        let connecting: Vec<_> = (0..batch)
            .map(|_| tokio::spawn(TcpStream::connect(addr)))
            .collect();
        for c in connecting {
            let stream = c.await.map_err(io::Error::other)??;
            stream.set_nodelay(true)?;
            streams.push(stream);
        }
    }
    Ok(streams)
}

/// The request of round `round` of connection `id`.
fn request(id: usize, round: usize) -> [u8; MESSAGE] {
    let mut message = [0; MESSAGE];
    message[..8].copy_from_slice(&(id as u64).to_le_bytes());
    message[8..16].copy_from_slice(&(round as u64).to_le_bytes());
    for (i, byte) in message[16..].iter_mut().enumerate() {
        *byte = (id + round + i) as u8;
    }
    message
}

/// `rounds` round trips on `stream`; the latency of each, in nanoseconds.
async fn round_trips(mut stream: TcpStream, id: usize, rounds: usize) -> io::Result<Vec<u64>> {
    let mut latencies = Vec::with_capacity(rounds);
    let mut back = [0; MESSAGE];
    for round in 0..rounds {
        let sent = request(id, round);
        let started = Instant::now();
        stream.write_all(&sent).await?;
        stream.read_exact(&mut back).await?;
        latencies.push(started.elapsed().as_nanos() as u64);
        if back != sent {
            return Err(io::Error::other(format!(
                "connection {id}, round {round}: the echo differs from the request"
            )));
        }
    }
    Ok(latencies)
}

/// One run's measurements.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub measured: Measured,
    /// Round trips per second.
    pub throughput: f64,
    /// Seconds.
    pub p50: f64,
    pub p99: f64,
}

/// One run against `server`: `conns` clients × `rounds` round trips.
pub fn run(
    client: &Runtime,
    server: Server,
    conns: usize,
    rounds: usize,
) -> Result<Sample, String> {
    let addr = server.addr;
    let streams = client
        .block_on(connect_all(addr, conns))
        .map_err(|e| format!("connect: {e}"))?;
    server
        .conns
        .settle("accepting", |accepted, _| accepted >= conns)?;
    let clock = Stopwatch::start();
    let tasks: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(id, stream)| client.spawn(round_trips(stream, id, rounds)))
        .collect();
    let latencies = client.block_on(async {
        tokio::time::timeout(WAIT, async {
            let mut all = Vec::with_capacity(conns * rounds);
            for task in tasks {
                all.extend(
                    task.await
                        .map_err(|e| e.to_string())?
                        .map_err(|e| e.to_string())?,
                );
            }
            Ok::<_, String>(all)
        })
        .await
        .map_err(|_| format!("the round trips took more than {WAIT:?}"))?
    });
    let measured = clock.stop();
    let stopped = server.stop();
    let mut latencies = latencies?;
    stopped?;
    crate::harness::check("round trips", latencies.len(), conns * rounds)?;
    latencies.sort_unstable();
    let seconds: Vec<f64> = latencies.iter().map(|&ns| ns as f64 * 1e-9).collect();
    Ok(Sample {
        measured,
        throughput: seconds.len() as f64 / measured.wall.as_secs_f64(),
        p50: percentile(&seconds, 50.0),
        p99: percentile(&seconds, 99.0),
    })
}

// ---------------------------------------------------------------- the case

struct Form {
    label: String,
    start: Box<dyn Fn() -> Result<Server, String>>,
}

/// The forms: tokio first (the baseline), then wsched on the same thread budget,
/// then wsched with its defaults.
fn forms(workers: usize) -> Vec<Form> {
    let wsched_workers = (workers / 2).max(1);
    let io = workers.saturating_sub(wsched_workers).max(1);
    let n =
        |count: usize, what: &str| format!("{count} {what}{}", if count == 1 { "" } else { "s" });
    vec![
        Form {
            label: format!("tokio, {}", n(workers, "worker thread")),
            start: Box::new(move || Server::tokio(workers)),
        },
        Form {
            label: format!(
                "wsched, {} + {}",
                n(wsched_workers, "worker"),
                n(io, "I/O thread")
            ),
            start: Box::new(move || Server::wsched(wsched_workers, Some(io))),
        },
        Form {
            label: format!("wsched, {} + the default I/O threads", n(workers, "worker")),
            start: Box::new(move || Server::wsched(workers, None)),
        },
    ]
}

/// The median of `f` over `samples`.
fn median_of(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> f64 {
    median(&mut samples.iter().map(f).collect::<Vec<_>>())
}

/// The median, min and max of the per-repetition ratios `f(a) ÷ f(b)`.
fn ratios(a: &[Sample], b: &[Sample], f: impl Fn(&Sample) -> f64) -> (f64, f64, f64) {
    let mut r: Vec<f64> = a.iter().zip(b).map(|(a, b)| f(a) / f(b)).collect();
    let (lo, hi) = (
        r.iter().copied().fold(f64::INFINITY, f64::min),
        r.iter().copied().fold(0.0, f64::max),
    );
    (median(&mut r), lo, hi)
}

/// Runs the case: `conns` connections × `rounds` round trips a run, `reps`
/// interleaved repetitions after a warm-up run of each form.
pub fn tcp_echo(report: &mut Report, workers: usize, conns: usize, rounds: usize, reps: usize) {
    eprint!("{:<24} ", "tcp_echo");
    let started = Instant::now();
    // Both ends of every connection, and some to spare.
    let wanted = 2 * conns as u64 + 256;
    let limit = crate::sys::raise_fd_limit(wanted);
    if limit < wanted {
        report.fail(
            "tcp_echo",
            &format!("needs {wanted} open files and the limit is {limit} (raise `ulimit -n`)"),
        );
        return;
    }
    let forms = forms(workers);
    let client = client_runtime();
    let mut samples: Vec<Vec<Sample>> = forms.iter().map(|_| Vec::new()).collect();
    let once = |form: &Form| -> Result<Sample, String> {
        let server = (form.start)()?;
        run(&client, server, conns, rounds).map_err(|e| format!("{}: {e}", form.label))
    };
    let result = (|| {
        for form in &forms {
            once(form).map_err(|e| format!("warm-up, {e}"))?;
        }
        eprint!("w");
        for rep in 0..reps {
            let order: Vec<usize> = if rep % 2 == 0 {
                (0..forms.len()).collect()
            } else {
                (0..forms.len()).rev().collect()
            };
            for f in order {
                let sample = once(&forms[f]).map_err(|e| format!("repetition {}, {e}", rep + 1))?;
                samples[f].push(sample);
            }
            eprint!(".");
        }
        Ok::<(), String>(())
    })();
    drop(client);
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());
    if let Err(e) = result {
        report.fail("tcp_echo", &e);
        return;
    }

    let mut md = format!(
        "**TCP echo**, {conns} connections × {rounds} round trips of {MESSAGE} bytes over \
         loopback a run ({reps} runs interleaved; the load generator: a tokio runtime of \
         {CLIENT_THREADS} threads in the same process)\n\n\
         | server | round trips/s | p50 | p99 | cores busy (whole process) |\n|---|---|---|---|---|"
    );
    for (form, s) in forms.iter().zip(&samples) {
        md += &format!(
            "\n| {} | {:.0} | {} | {} | {:.1} |",
            form.label,
            median_of(s, |s| s.throughput),
            fmt_secs(median_of(s, |s| s.p50)),
            fmt_secs(median_of(s, |s| s.p99)),
            median_of(s, |s| s.measured.cpu.as_secs_f64()
                / s.measured.wall.as_secs_f64()),
        );
    }
    md += "\n\n| wsched ÷ tokio | throughput (target ≥ 0.8) | p50 | p99 (target ≤ 1.3) |\n|---|---|---|---|";
    for (form, s) in forms.iter().zip(&samples).skip(1) {
        let (t, t_lo, t_hi) = ratios(s, &samples[0], |s| s.throughput);
        let (p50, p50_lo, p50_hi) = ratios(s, &samples[0], |s| s.p50);
        let (p99, p99_lo, p99_hi) = ratios(s, &samples[0], |s| s.p99);
        let met = |ok: bool| if ok { "met" } else { "**not met**" };
        md += &format!(
            "\n| {} | **{t:.2}** ({t_lo:.2}–{t_hi:.2}), {} | {p50:.2} ({p50_lo:.2}–{p50_hi:.2}) | \
             **{p99:.2}** ({p99_lo:.2}–{p99_hi:.2}), {} |",
            form.label,
            met(t >= 0.8),
            met(p99 <= 1.3),
        );
    }
    report.section(md);
}
