//! Processes calling an HTTP server through a client library, `reqwest`, in an async
//! handler (wsched's `tokio` feature). A process never `.await`s: it yields a
//! `Fetch { url }` and is parked; the handler's future does the I/O on the I/O
//! runtime, and is dropped as soon as nobody waits for its result.
//!
//! * a small **HTTP/1.1 server** on loopback, hand-written on its own tokio runtime
//!   (the far side of the network): `/hello/NAME` answers after 50 ms, `/missing` is
//!   a 404, and `/slow` never answers — it tells `main` when its client hangs up;
//! * an **async handler** for `Fetch` with `reqwest`, at most two at once
//!   (`AsyncOptions::max_in_flight`; the others wait in line);
//! * four **processes fetching in parallel**; the 404 fails its yield with
//!   `YieldError::Failed`, whose source is still the `reqwest::Error` (its status);
//! * a process **cancelled** while it waits for `/slow`: its yield is withdrawn, the
//!   future dropped, the connection closed — and the server sees it close;
//! * a `Probe` command whose handler has a **timeout** (`AsyncOptions::timeout`): the
//!   yield fails with `YieldError::TimedOut`, and again the server sees the close;
//! * the handlers' **metrics**, and a **shutdown** while a fetch is out, which the
//!   report counts as aborted work.
//!
//! It checks every outcome as it goes, so it fails loudly if one differs.
//!
//! `cargo run -p wsched-examples --example http_client`

use std::error::Error;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use wsched::io::{AsyncOptions, WhenFull};
use wsched::prelude::*;
use wsched::{ExitReason, Scheduler};

/// How long `main` waits for anything before it calls it lost (everything here
/// takes well under a second).
const WAIT: Duration = Duration::from_secs(10);

/// At most this many fetches run at once; more wait in line.
const LIMIT: usize = 2;

/// A probe gives up after this long.
const PROBE_TIMEOUT: Duration = Duration::from_millis(200);

// ANCHOR: commands
/// "Get this page." The process only asks; the async handler does it.
struct Fetch {
    url: String,
}

impl Command for Fetch {
    type Output = Page;
}

/// "Does this URL answer?" Its handler gives up after `PROBE_TIMEOUT`.
struct Probe {
    url: String,
}

impl Command for Probe {
    type Output = u16; // the status
}

struct Page {
    status: u16,
    body: String,
}
// ANCHOR_END: commands

// ANCHOR: process
/// Fetches one URL, as a plain state machine: parked at the yield while the
/// handler's future runs on the I/O runtime.
struct Fetcher;

#[process]
impl Fetcher {
    /// The page, or the server's refusal; a cancel (or any other failure) ends the
    /// process with it.
    #[entry]
    fn get(&mut self, url: String) -> Result<String, BoxError> {
        match yield_cmd!(Fetch { url }) {
            Ok(page) => Ok(format!("{} {}", page.status, page.body)),
            // The handler's `Err`, as it made it: a `reqwest::Error` knows the status.
            Err(YieldError::Failed { source, .. }) => {
                match source
                    .downcast_ref::<reqwest::Error>()
                    .and_then(|e| e.status())
                {
                    Some(status) => Ok(format!("failed: the server said {status}")),
                    None => Err(source),
                }
            }
            Err(other) => Err(other.into()),
        }
    }

    /// Whether `url` answers in time.
    #[entry]
    fn probe(&mut self, url: String) -> Result<String, BoxError> {
        match yield_cmd!(Probe { url }) {
            Ok(status) => Ok(format!("answered {status}")),
            Err(YieldError::TimedOut { after, .. }) => Ok(format!("timed out after {after:?}")),
            Err(other) => Err(other.into()),
        }
    }
}
// ANCHOR_END: process

/// The scheduler, with an async handler for each command, both on one `reqwest`
/// client (a pool of connections, cheap to clone).
fn scheduler() -> Result<Scheduler, Box<dyn Error>> {
    // Plain HTTP to loopback: no proxy from the environment in the way.
    let client = reqwest::Client::builder().no_proxy().build()?;
    let probe_client = client.clone();
    // ANCHOR: handlers
    let scheduler = Scheduler::builder()
        .workers(2)
        .async_handler_with(
            AsyncOptions::new()
                .max_in_flight(LIMIT)
                .when_full(WhenFull::Queue),
            move |Fetch { url }: Fetch, _| {
                let client = client.clone();
                // Runs on the I/O runtime; dropped if the process stops waiting.
                async move {
                    let response = client.get(url).send().await?.error_for_status()?;
                    let status = response.status().as_u16();
                    let body = response.text().await?;
                    Ok::<_, reqwest::Error>(Page { status, body })
                }
            },
        )
        .async_handler_with(
            AsyncOptions::new().timeout(PROBE_TIMEOUT),
            move |Probe { url }: Probe, _| {
                let client = probe_client.clone();
                async move {
                    let response = client.get(url).send().await?;
                    Ok::<_, reqwest::Error>(response.status().as_u16())
                }
            },
        )
        .build()?;
    // ANCHOR_END: handlers
    Ok(scheduler)
}

fn main() -> Result<(), Box<dyn Error>> {
    let server = Server::start()?;
    println!(
        "an HTTP server on {}: /hello/NAME, /missing, /slow",
        server.addr
    );
    let scheduler = scheduler()?;

    // Four processes fetch at once; two fetches run at a time, the others queue.
    println!("\nfour processes fetch at once:");
    let paths = ["/hello/ada", "/hello/grace", "/hello/barbara", "/missing"];
    let mut pids = Vec::new();
    for path in paths {
        pids.push(scheduler.spawn(Fetcher, Fetcher::GET, (server.url(path),))?);
    }
    let mut said = Vec::new();
    for (path, pid) in paths.iter().zip(pids) {
        let text = scheduler.wait_timeout(pid, WAIT)?.downcast::<String>()?;
        println!("  {pid} {path:<15} {text}");
        said.push(text);
    }
    assert_eq!(
        said,
        [
            "200 hello, ada",
            "200 hello, grace",
            "200 hello, barbara",
            "failed: the server said 404 Not Found",
        ]
    );
    let peak = server.hello_peak.load(Ordering::SeqCst);
    assert!((1..=LIMIT).contains(&peak), "{peak} requests at once");
    println!(
        "  the server never had more than {LIMIT} at once: max_in_flight({LIMIT}) queued the rest"
    );

    // A process cancelled while it waits: its yield is withdrawn, and the future —
    // with reqwest's request and its connection — is dropped.
    println!("\na process waits for /slow, which never answers, and is cancelled:");
    let pid = scheduler.spawn(Fetcher, Fetcher::GET, (server.url("/slow"),))?;
    server.expect(Slow::Arrived)?;
    println!("  the server has the request");
    scheduler.cancel(pid)?;
    let reason = scheduler.wait_timeout(pid, WAIT).unwrap_err().exit_reason();
    assert_eq!(reason, Some(ExitReason::Cancelled));
    println!("  {pid} ended: {}", reason.expect("it ended"));
    server.expect(Slow::Closed)?;
    println!("  the server saw the client close the connection: the future was dropped");

    // A handler with a timeout: the yield fails, the future is dropped.
    println!("\na probe of /slow, whose handler times out after {PROBE_TIMEOUT:?}:");
    let pid = scheduler.spawn(Fetcher, Fetcher::PROBE, (server.url("/slow"),))?;
    server.expect(Slow::Arrived)?;
    let text = scheduler.wait_timeout(pid, WAIT)?.downcast::<String>()?;
    assert_eq!(text, format!("timed out after {PROBE_TIMEOUT:?}"));
    println!("  {pid} {text}");
    server.expect(Slow::Closed)?;
    println!("  the server saw the client close the connection");

    println!("\nthe async handlers' metrics:");
    let metrics = scheduler.metrics();
    let mut counts = Vec::new();
    // The user's handlers come first; the built-in TCP ones follow.
    for handler in &metrics.async_handlers[..2] {
        let name = handler
            .command
            .rsplit("::")
            .next()
            .unwrap_or(handler.command);
        println!(
            "  {name:<6} {} completed, {} failed, {} timed out, {} aborted, {} in flight",
            handler.completed,
            handler.failed,
            handler.timed_out,
            handler.aborted,
            handler.in_flight
        );
        counts.push((
            name,
            handler.completed,
            handler.failed,
            handler.timed_out,
            handler.aborted,
        ));
    }
    assert_eq!(counts, [("Fetch", 3, 1, 0, 1), ("Probe", 0, 0, 1, 0)]);
    assert_eq!((metrics.aborted_work, metrics.work_in_flight), (1, 0));
    println!(
        "  work aborted in all: {}, in flight now: {}",
        metrics.aborted_work, metrics.work_in_flight
    );

    // A shutdown while a fetch is out: the process is cancelled, its future
    // dropped, and the owned I/O runtime stopped.
    println!("\nshutting down while a process waits for /slow:");
    let pid = scheduler.spawn(Fetcher, Fetcher::GET, (server.url("/slow"),))?;
    server.expect(Slow::Arrived)?;
    let report = scheduler.shutdown(Duration::from_secs(1));
    assert_eq!(
        scheduler.wait(pid).unwrap_err().exit_reason(),
        Some(ExitReason::Cancelled)
    );
    assert_eq!(
        (report.finished, report.stopped.len(), report.aborted_work),
        (1, 0, 1)
    );
    println!(
        "  shutdown: {} finished while shutting down, {} stopped, {} piece of work aborted",
        report.finished,
        report.stopped.len(),
        report.aborted_work
    );
    server.expect(Slow::Closed)?;
    println!("  the server saw the client close the connection");
    Ok(())
}

/// What the server tells `main` of a request for `/slow`.
#[derive(Debug, PartialEq, Eq)]
enum Slow {
    /// It came in.
    Arrived,
    /// Its client closed the connection, without waiting for an answer.
    Closed,
    /// Its client was still there after `WAIT`.
    KeptOpen,
}

/// A minimal HTTP/1.1 server on loopback, on a tokio runtime of its own: one
/// request per connection (`Connection: close`), no request bodies.
struct Server {
    addr: SocketAddr,
    seen: mpsc::Receiver<Slow>,
    /// The most `/hello` requests it worked on at once.
    hello_peak: Arc<AtomicUsize>,
    _runtime: tokio::runtime::Runtime,
}

impl Server {
    fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("http-server")
            .enable_all()
            .build()?;
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        let (tell, seen) = mpsc::channel();
        let hello_peak = Arc::new(AtomicUsize::new(0));
        let load = Load {
            now: Arc::new(AtomicUsize::new(0)),
            peak: hello_peak.clone(),
        };
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, tell.clone(), load.clone()));
            }
        });
        Ok(Self {
            addr,
            seen,
            hello_peak,
            _runtime: runtime,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Waits for the server to report `expected`.
    fn expect(&self, expected: Slow) -> Result<(), Box<dyn Error>> {
        let seen = self.seen.recv_timeout(WAIT)?;
        if seen == expected {
            Ok(())
        } else {
            Err(format!("the server saw {seen:?}, not {expected:?}").into())
        }
    }
}

/// The `/hello` requests being worked on, and the most at once.
#[derive(Clone)]
struct Load {
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

/// Answers one request.
async fn serve(mut stream: TcpStream, tell: mpsc::Sender<Slow>, load: Load) -> std::io::Result<()> {
    // The request's head, up to the blank line.
    let mut head = Vec::new();
    let mut buffer = [0; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let (status, body) = if let Some(name) = path.strip_prefix("/hello/") {
        // Counted until the answer is about to be written: by then the client's
        // future still runs, so this never exceeds the handler's limit.
        let now = load.now.fetch_add(1, Ordering::SeqCst) + 1;
        load.peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        load.now.fetch_sub(1, Ordering::SeqCst);
        ("200 OK", format!("hello, {name}"))
    } else if path == "/slow" {
        // Never answers: waits for the client to hang up (a read of 0 bytes, or an
        // error), and says whether it did.
        let _ = tell.send(Slow::Arrived);
        let waited = Instant::now();
        let seen = loop {
            let left = WAIT.saturating_sub(waited.elapsed());
            match tokio::time::timeout(left, stream.read(&mut buffer)).await {
                Ok(Ok(0) | Err(_)) => break Slow::Closed,
                Ok(Ok(_)) => continue, // more of the request: not a hang-up
                Err(_) => break Slow::KeptOpen,
            }
        };
        let _ = tell.send(seen);
        return Ok(());
    } else {
        ("404 Not Found", "no such page".to_owned())
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
