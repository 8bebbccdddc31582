//! Async handlers and sockets over real loopback sockets (the `tokio` feature).

use wsched::prelude::*;
use wsched::Scheduler;

struct Double(u64);
impl Command for Double {
    type Output = u64;
}

struct Asker;

#[process]
impl Asker {
    #[entry]
    fn ask(&mut self, n: u64) -> Result<u64, BoxError> {
        Ok(yield_cmd!(Double(n))?)
    }
}

#[test]
fn an_async_handler_completes_the_yield() {
    let scheduler = Scheduler::builder()
        .workers(2)
        .async_handler(|Double(n): Double| async move { Ok::<_, std::io::Error>(n * 2) })
        .build()
        .unwrap();
    let pid = scheduler.spawn(Asker, Asker::ASK, (21,)).unwrap();
    assert_eq!(scheduler.wait(pid).unwrap().downcast::<u64>().unwrap(), 42);
}

// ===== TCP =====
//
// Every socket is on loopback, on a port the system picks. Nothing sleeps: each
// step waits for what it needs (a message in an inbox, a read, a `Down`) with a
// bounded timeout, and the only negative checks ("no chunk came that was not asked
// for") are a process's own `recv!` timeouts.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use wsched::io::tcp::{ConnId, Listener, TcpConn, TcpConnect, TcpEvent};
use wsched::{ExitReason, Handle, Inbox};

/// How long any one wait may take before the test fails: long, since it is only
/// reached when something is wrong.
const PATIENCE: Duration = Duration::from_secs(10);

fn scheduler() -> Scheduler {
    Scheduler::builder().workers(2).build().unwrap()
}

fn listen<P: wsched::IntoProcess>(
    handle: &Handle,
    make: impl FnMut(SocketAddr) -> P + Send + 'static,
    entry: wsched::Entry<P, (TcpConn,)>,
) -> Listener {
    Listener::bind(handle, "127.0.0.1:0", make, entry).unwrap()
}

/// A client with bounded reads and writes.
fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream.set_write_timeout(Some(PATIENCE)).unwrap();
    stream
}

/// Reads until the end of the stream, failing on a timeout.
fn read_to_end(stream: &mut TcpStream) -> Vec<u8> {
    let mut bytes = Vec::new();
    stream
        .read_to_end(&mut bytes)
        .expect("the end of the stream, within the timeout");
    bytes
}

fn inbox_recv<T: std::any::Any + Send>(inbox: &Inbox) -> T {
    inbox
        .recv::<T>(PATIENCE)
        .expect("a report within the timeout")
}

/// Echoes until the client closes, then reports how much it echoed.
struct Echo {
    report: Pid,
}

#[derive(Debug)]
struct Served {
    conn: ConnId,
    peer: SocketAddr,
    echoed: usize,
}

#[process]
impl Echo {
    #[entry]
    fn serve(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        let mut echoed = 0;
        loop {
            conn.active_once();
            match recv!(TcpEvent)? {
                TcpEvent::Data { conn: id, bytes } => {
                    assert_eq!(id, conn.id());
                    echoed += bytes.len();
                    yield_cmd!(conn.write(bytes))?;
                }
                TcpEvent::Closed { .. } => break,
                TcpEvent::Error { error, .. } => return Err(error.into()),
            }
        }
        let served = Served {
            conn: conn.id(),
            peer: conn.peer_addr(),
            echoed,
        };
        this::send(self.report, served)?;
        Ok(())
    }
}

#[test]
fn a_listener_spawns_a_process_per_connection_that_echoes() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(&scheduler.handle(), move |_| Echo { report }, Echo::SERVE);
    let addr = listener.local_addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0);

    let clients: Vec<_> = (0..3)
        .map(|n| {
            std::thread::spawn(move || {
                let mut stream = connect(addr);
                let local = stream.local_addr().unwrap();
                let mut sent = 0;
                for round in 0..5 {
                    let line = format!("client {n}, round {round}\n");
                    stream.write_all(line.as_bytes()).unwrap();
                    let mut echoed = vec![0; line.len()];
                    stream.read_exact(&mut echoed).unwrap();
                    assert_eq!(echoed, line.as_bytes());
                    sent += line.len();
                }
                // Half-close: the process sees Closed, ends, and its socket closes.
                stream.shutdown(std::net::Shutdown::Write).unwrap();
                assert!(read_to_end(&mut stream).is_empty());
                (local, sent)
            })
        })
        .collect();
    let mut expected: Vec<(SocketAddr, usize)> =
        clients.into_iter().map(|c| c.join().unwrap()).collect();
    let mut served: Vec<Served> = (0..3).map(|_| inbox_recv::<Served>(&inbox)).collect();
    let mut ids: Vec<ConnId> = served.iter().map(|s| s.conn).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "each connection has its own id");
    let mut got: Vec<(SocketAddr, usize)> = served.drain(..).map(|s| (s.peer, s.echoed)).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    listener.close();
}

#[test]
fn a_long_conversation_of_short_reads_never_stalls() {
    // Every read drains the socket and clears its readiness: each next message,
    // however it races the next `active_once`, must still wake the reader.
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(&scheduler.handle(), move |_| Echo { report }, Echo::SERVE);
    let mut stream = connect(listener.local_addr());
    let mut sent = 0;
    for round in 0..500_u32 {
        // Sometimes in two pieces, so a read may find half a message.
        let message = round.to_le_bytes();
        let (first, second) = message.split_at(if round % 3 == 0 { 2 } else { 4 });
        stream.write_all(first).unwrap();
        stream.write_all(second).unwrap();
        let mut echoed = [0; 4];
        stream.read_exact(&mut echoed).unwrap();
        assert_eq!(echoed, message);
        sent += message.len();
    }
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(read_to_end(&mut stream).is_empty());
    assert_eq!(inbox_recv::<Served>(&inbox).echoed, sent);
}

/// Asks for as many chunks as it is told, and reports what came: the chunks asked
/// for, and whether anything came beyond them.
struct Sipper {
    report: Pid,
}

struct Ready(Pid);
struct Permit(usize);
#[derive(Debug)]
struct Sipped {
    chunks: Vec<usize>,
    extra: bool,
}

const SIP: usize = 100;

#[process]
impl Sipper {
    #[entry]
    fn sip(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        conn.set_read_chunk(SIP);
        this::send(self.report, Ready(this::pid()))?;
        loop {
            let Permit(n) = recv!(Permit)?;
            for _ in 0..n {
                conn.active_once();
            }
            let mut chunks = Vec::new();
            for _ in 0..n {
                match recv!(TcpEvent)? {
                    TcpEvent::Data { bytes, .. } => chunks.push(bytes.len()),
                    other => return Err(format!("expected data, got {other:?}").into()),
                }
            }
            let extra = match recv!(TcpEvent, timeout = Duration::from_millis(100)) {
                Err(RecvError::Timeout) => false,
                Ok(_) => true,
                Err(other) => return Err(other.into()),
            };
            this::send(self.report, Sipped { chunks, extra })?;
        }
    }
}

#[test]
fn active_once_reads_one_chunk_per_call_and_no_more() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(&scheduler.handle(), move |_| Sipper { report }, Sipper::SIP);
    let mut client = connect(listener.local_addr());
    // Far more than is asked for; the kernel's buffers hold it all.
    let flood = vec![7_u8; 50_000];
    client.write_all(&flood).unwrap();
    let Ready(sipper) = inbox_recv::<Ready>(&inbox);

    let mut delivered = 0;
    let mut permitted = 0;
    for n in [1, 3, 2] {
        permitted += n;
        scheduler.send(sipper, Permit(n)).unwrap();
        let sipped = inbox_recv::<Sipped>(&inbox);
        assert_eq!(sipped.chunks.len(), n, "one chunk per call: {sipped:?}");
        assert!(!sipped.extra, "a chunk came that was not asked for");
        for &len in &sipped.chunks {
            assert!(
                (1..=SIP).contains(&len),
                "a chunk of {len} bytes: {sipped:?}"
            );
            delivered += len;
        }
        assert!(delivered <= permitted * SIP);
    }
    assert!(delivered > 0);
}

/// Collects everything the client sends, and reports it once the client closes.
struct Collector {
    report: Pid,
}

#[derive(Debug)]
struct Collected {
    bytes: Vec<u8>,
    closed: bool,
}

#[process]
impl Collector {
    #[entry]
    fn collect(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        let mut bytes = Vec::new();
        loop {
            conn.active_once();
            match recv!(TcpEvent)? {
                TcpEvent::Data { bytes: chunk, .. } => bytes.extend(chunk),
                TcpEvent::Closed { conn: id } => {
                    let closed = id == conn.id();
                    this::send(self.report, Collected { bytes, closed })?;
                    return Ok(());
                }
                TcpEvent::Error { error, .. } => return Err(error.into()),
            }
        }
    }
}

#[test]
fn a_client_gone_mid_message_is_reported_closed_after_its_partial_data() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(
        &scheduler.handle(),
        move |_| Collector { report },
        Collector::COLLECT,
    );
    let mut client = connect(listener.local_addr());
    client.write_all(b"GET /half-a-req").unwrap();
    drop(client);
    let collected = inbox_recv::<Collected>(&inbox);
    assert_eq!(collected.bytes, b"GET /half-a-req");
    assert!(collected.closed);
}

/// Tells who it is, then waits for a line to write, and ends.
struct Idle {
    report: Pid,
}

struct Started(Pid);

#[process]
impl Idle {
    #[entry]
    fn idle(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        this::send(self.report, Started(this::pid()))?;
        let line = recv!(String)?;
        yield_cmd!(conn.write(line))?;
        Ok(())
    }
}

#[test]
fn killing_a_connections_process_closes_its_socket() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(&scheduler.handle(), move |_| Idle { report }, Idle::IDLE);
    let mut client = connect(listener.local_addr());
    let Started(pid) = inbox_recv::<Started>(&inbox);
    scheduler.kill(pid).unwrap();
    assert!(
        read_to_end(&mut client).is_empty(),
        "the peer reads the end"
    );
    // The listener is not the connection's: it goes on.
    let mut second = connect(listener.local_addr());
    let Started(other) = inbox_recv::<Started>(&inbox);
    assert_ne!(other, pid);
    scheduler.send(other, "done".to_string()).unwrap(); // it finishes normally
    assert_eq!(read_to_end(&mut second), b"done");
}

/// Connects to `addr`, says hello, and returns the answer.
struct Dialer;

#[process]
impl Dialer {
    #[entry]
    fn dial(&mut self, addr: SocketAddr) -> Result<(SocketAddr, Vec<u8>), BoxError> {
        let conn: TcpConn = yield_cmd!(TcpConnect::new(addr))?;
        assert_eq!(conn.owner(), Some(this::pid()));
        yield_cmd!(conn.write("hello"))?;
        let mut answer = Vec::new();
        while answer.len() < 5 {
            conn.active_once();
            match recv!(TcpEvent)? {
                TcpEvent::Data { bytes, .. } => answer.extend(bytes),
                other => return Err(format!("expected the answer, got {other:?}").into()),
            }
        }
        Ok((conn.peer_addr(), answer))
    }

    /// What the connect's failure says: its io::Error's kind and the message.
    #[entry]
    fn dial_in_vain(&mut self, addr: SocketAddr) -> Result<(ErrorKind, String), BoxError> {
        match yield_cmd!(TcpConnect::new(addr)) {
            Ok(conn) => Err(format!("connected: {conn:?}").into()),
            Err(YieldError::Failed { source, .. }) => {
                let error = source
                    .downcast_ref::<std::io::Error>()
                    .ok_or("the source is not an io::Error")?;
                Ok((error.kind(), error.to_string()))
            }
            Err(other) => Err(other.into()),
        }
    }
}

#[test]
fn tcp_connect_gives_the_yielding_process_a_connection() {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut stream, _) = server.accept().unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut hello = [0; 5];
        stream.read_exact(&mut hello).unwrap();
        stream.write_all(&hello.to_ascii_uppercase()).unwrap();
        // Held open until the process has read the answer and ended.
        read_to_end(&mut stream)
    });
    let scheduler = scheduler();
    let pid = scheduler.spawn(Dialer, Dialer::DIAL, (addr,)).unwrap();
    let (peer_addr, answer) = scheduler
        .wait_timeout(pid, PATIENCE)
        .unwrap()
        .downcast::<(SocketAddr, Vec<u8>)>()
        .unwrap();
    assert_eq!(peer_addr, addr);
    assert_eq!(answer, b"HELLO");
    // The process ended: its connection closed.
    assert!(peer.join().unwrap().is_empty());
}

#[test]
fn tcp_connect_to_a_closed_port_fails_with_connection_refused() {
    let addr = {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        closed.local_addr().unwrap()
    };
    let scheduler = scheduler();
    let pid = scheduler
        .spawn(Dialer, Dialer::DIAL_IN_VAIN, (addr,))
        .unwrap();
    let (kind, message) = scheduler
        .wait_timeout(pid, PATIENCE)
        .unwrap()
        .downcast::<(ErrorKind, String)>()
        .unwrap();
    assert_eq!(kind, ErrorKind::ConnectionRefused);
    assert!(
        message.contains(&format!("cannot connect to {addr}")),
        "{message}"
    );
}

#[test]
fn killing_the_listener_closes_the_listening_socket() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(&scheduler.handle(), move |_| Idle { report }, Idle::IDLE);
    let addr = listener.local_addr();
    // A connection accepted before: it is its process's, and outlives the listener.
    let mut before = connect(addr);
    let Started(served) = inbox_recv::<Started>(&inbox);

    let down = scheduler.monitor(listener.pid());
    scheduler.kill(listener.pid()).unwrap();
    let down = down.wait_timeout(PATIENCE).expect("the listener ended");
    assert_eq!(down.reason, ExitReason::Killed);
    let refused = TcpStream::connect(addr).expect_err("nothing listens any more");
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);

    scheduler.send(served, "done".to_string()).unwrap();
    assert_eq!(read_to_end(&mut before), b"done");
}

#[test]
fn closing_the_listener_ends_it_normally_and_refuses_new_connections() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(&scheduler.handle(), move |_| Echo { report }, Echo::SERVE);
    let addr = listener.local_addr();
    let mut open = connect(addr);
    open.write_all(b"before").unwrap();
    let mut echoed = [0; 6];
    open.read_exact(&mut echoed).unwrap();

    let down = scheduler.monitor(listener.pid());
    listener.close();
    // Closed as `close` returns, before the process has even ended.
    let refused = TcpStream::connect(addr).expect_err("nothing listens any more");
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
    assert_eq!(
        down.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Normal
    );
    listener.close(); // again: nothing happens

    // The connection accepted before goes on.
    open.write_all(b"after").unwrap();
    let mut echoed = [0; 5];
    open.read_exact(&mut echoed).unwrap();
    assert_eq!(&echoed, b"after");
}

/// Shuts its write side down, then tries to write, then reads what the peer
/// sends after the shutdown.
struct HalfCloser {
    report: Pid,
}

#[derive(Debug)]
struct HalfClosed {
    write_error: Option<ErrorKind>,
    read_after: Vec<u8>,
}

#[process]
impl HalfCloser {
    #[entry]
    fn half_close(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        yield_cmd!(conn.write("bye"))?;
        yield_cmd!(conn.shutdown())?;
        let write_error = match yield_cmd!(conn.write("too late")) {
            Ok(()) => None,
            Err(YieldError::Failed { source, .. }) => {
                source.downcast_ref::<std::io::Error>().map(|e| e.kind())
            }
            Err(other) => return Err(other.into()),
        };
        let mut read_after = Vec::new();
        loop {
            conn.active_once();
            match recv!(TcpEvent)? {
                TcpEvent::Data { bytes, .. } => read_after.extend(bytes),
                TcpEvent::Closed { .. } => break,
                TcpEvent::Error { error, .. } => return Err(error.into()),
            }
        }
        let report = HalfClosed {
            write_error,
            read_after,
        };
        this::send(self.report, report)?;
        Ok(())
    }
}

#[test]
fn a_shutdown_closes_the_write_side_and_a_later_write_fails_with_its_io_error() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(
        &scheduler.handle(),
        move |_| HalfCloser { report },
        HalfCloser::HALF_CLOSE,
    );
    let mut client = connect(listener.local_addr());
    assert_eq!(read_to_end(&mut client), b"bye");
    // The server still reads.
    client.write_all(b"still listening?").unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let half_closed = inbox_recv::<HalfClosed>(&inbox);
    assert_eq!(half_closed.write_error, Some(ErrorKind::BrokenPipe));
    assert_eq!(half_closed.read_after, b"still listening?");
}

/// Hands its connection to a process of its own, then ends.
struct Handoff {
    report: Pid,
}

/// Receives a connection, reads one chunk of it, answers, and reports the chunk.
struct Taker {
    report: Pid,
}

struct Taken(Vec<u8>);

#[process]
impl Handoff {
    #[entry]
    fn hand_off(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        let taker = this::spawn(
            Taker {
                report: self.report,
            },
            Taker::TAKE,
            (),
        )?;
        conn.set_owner(taker);
        this::send(taker, conn)?;
        Ok(())
    }
}

#[process]
impl Taker {
    #[entry]
    fn take(&mut self) -> Result<(), BoxError> {
        let conn = recv!(TcpConn)?;
        conn.active_once();
        let TcpEvent::Data { bytes, .. } = recv!(TcpEvent)? else {
            return Err("expected data".into());
        };
        yield_cmd!(conn.write("taken"))?;
        this::send(self.report, Taken(bytes))?;
        Ok(())
    }
}

#[test]
fn a_connection_handed_to_another_process_reads_for_its_new_owner() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(
        &scheduler.handle(),
        move |_| Handoff { report },
        Handoff::HAND_OFF,
    );
    let mut client = connect(listener.local_addr());
    client.write_all(b"for the taker").unwrap();
    let Taken(bytes) = inbox_recv::<Taken>(&inbox);
    assert_eq!(bytes, b"for the taker");
    // The taker ended after answering: the answer, then the end.
    assert_eq!(read_to_end(&mut client), b"taken");
}

// After the reader task has sent a chunk to one owner: a new owner gets the next
// chunk, and a chunk for an owner that has ended closes the connection. (For
// any cache of the owner the reader may keep.) Each chunk is written only once
// the read is asked for, so that the reader, not `active_once`, sends it.

/// Told to the test each time a read was asked for.
struct Asked;

/// Reads one chunk itself, then hands its connection to a process of its own.
struct Keeper {
    report: Pid,
}

/// Gets a connection, reads one chunk, and reports it.
struct Receiver {
    report: Pid,
}

struct Kept(Vec<u8>);

struct Received(Vec<u8>);

#[process]
impl Keeper {
    #[entry]
    fn keep(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        conn.active_once();
        this::send(self.report, Asked)?;
        let TcpEvent::Data { bytes, .. } = recv!(TcpEvent)? else {
            return Err("expected data".into());
        };
        this::send(self.report, Kept(bytes))?;
        let receiver = this::spawn(
            Receiver {
                report: self.report,
            },
            Receiver::RECEIVE,
            (),
        )?;
        conn.set_owner(receiver);
        this::send(receiver, conn)?;
        Ok(())
    }

    /// Lends its reads to a receiver that ends after one, then asks for another.
    #[entry]
    fn lend(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        let receiver = this::spawn(
            Receiver {
                report: self.report,
            },
            Receiver::RECEIVE_ONE,
            (),
        )?;
        conn.set_owner(receiver);
        conn.active_once();
        this::send(self.report, Asked)?;
        yield_cmd!(wsched::command::Join(receiver))??;
        conn.active_once();
        this::send(self.report, Asked)?;
        // Keeps the connection: only the failed send may close it.
        let _ = recv!(TcpEvent, timeout = PATIENCE);
        Ok(())
    }
}

#[process]
impl Receiver {
    #[entry]
    fn receive(&mut self) -> Result<(), BoxError> {
        let conn = recv!(TcpConn)?;
        conn.active_once();
        this::send(self.report, Asked)?;
        self.receive_one().await
    }

    #[entry]
    fn receive_one(&mut self) -> Result<(), BoxError> {
        let TcpEvent::Data { bytes, .. } = recv!(TcpEvent)? else {
            return Err("expected data".into());
        };
        this::send(self.report, Received(bytes))?;
        Ok(())
    }
}

#[test]
fn a_connection_handed_on_after_its_reader_sent_a_chunk_reads_for_the_new_owner() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(
        &scheduler.handle(),
        move |_| Keeper { report },
        Keeper::KEEP,
    );
    let mut client = connect(listener.local_addr());
    inbox_recv::<Asked>(&inbox);
    client.write_all(b"for the keeper").unwrap();
    let Kept(bytes) = inbox_recv::<Kept>(&inbox);
    assert_eq!(bytes, b"for the keeper");
    inbox_recv::<Asked>(&inbox);
    client.write_all(b"for the receiver").unwrap();
    let Received(bytes) = inbox_recv::<Received>(&inbox);
    assert_eq!(bytes, b"for the receiver");
}

#[test]
fn a_chunk_for_an_owner_that_has_ended_closes_the_connection() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(
        &scheduler.handle(),
        move |_| Keeper { report },
        Keeper::LEND,
    );
    let mut client = connect(listener.local_addr());
    inbox_recv::<Asked>(&inbox);
    client.write_all(b"one").unwrap();
    let Received(bytes) = inbox_recv::<Received>(&inbox);
    assert_eq!(bytes, b"one");
    // Asked once the receiver has ended.
    inbox_recv::<Asked>(&inbox);
    client.write_all(b"two").unwrap();
    assert!(read_to_end(&mut client).is_empty());
}

#[test]
fn a_shutdown_closes_listeners_and_connections() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let report = inbox.pid();
    let listener = listen(&scheduler.handle(), move |_| Idle { report }, Idle::IDLE);
    let addr = listener.local_addr();
    let mut client = connect(addr);
    inbox_recv::<Started>(&inbox);
    let report = scheduler.shutdown(PATIENCE);
    assert!(
        report.stopped.is_empty(),
        "all of them ended when cancelled"
    );
    assert!(read_to_end(&mut client).is_empty());
    let refused = TcpStream::connect(addr).expect_err("nothing listens any more");
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
    let late = Listener::bind(
        &scheduler.handle(),
        "127.0.0.1:0",
        move |_| Idle {
            report: inbox.pid(),
        },
        Idle::IDLE,
    );
    assert!(late.is_err(), "no listener after the shutdown");
}

#[test]
fn a_listener_whose_make_panics_fails_and_stops_listening() {
    let scheduler = scheduler();
    let listener = listen(
        &scheduler.handle(),
        |_| -> Echo { panic!("no process for you") },
        Echo::SERVE,
    );
    let down = scheduler.monitor(listener.pid());
    let mut client = connect(listener.local_addr());
    let reason = down
        .wait_timeout(PATIENCE)
        .expect("the listener ended")
        .reason;
    let ExitReason::Error { message } = reason else {
        panic!("expected a failure, got {reason:?}");
    };
    assert!(
        message.contains("its `make` closure panicked: no process for you"),
        "{message}"
    );
    // The connection it could not serve is closed, and so is the socket.
    assert!(read_to_end(&mut client).is_empty());
    let refused = TcpStream::connect(listener.local_addr()).expect_err("closed");
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn binding_an_address_in_use_fails_at_once() {
    let scheduler = scheduler();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let error = Listener::bind(
        &scheduler.handle(),
        addr,
        |_| Idle {
            report: Pid::from_raw(1),
        },
        Idle::IDLE,
    )
    .expect_err("the address is taken");
    assert_eq!(error.kind(), ErrorKind::AddrInUse);
}

// ===== UDP =====
//
// As for TCP: loopback only, ports the system picks, every wait bounded. A
// std::net::UdpSocket is the peer, with a read timeout.

use wsched::io::udp::{UdpEvent, UdpSocket};

/// A std socket on loopback, with bounded receives.
fn udp_peer() -> std::net::UdpSocket {
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(PATIENCE)).unwrap();
    peer
}

/// Binds a socket of its own, tells where, then answers `rounds` datagrams with
/// the same bytes in upper case, and returns how many bytes it sent.
struct Upper {
    handle: Handle,
    report: Pid,
}

struct BoundAt(SocketAddr);

#[process]
impl Upper {
    #[entry]
    fn serve(&mut self, rounds: usize) -> Result<usize, BoxError> {
        let socket = UdpSocket::bind(&self.handle, "127.0.0.1:0")?;
        assert_eq!(socket.owner(), None, "no owner until set");
        socket.set_owner(this::pid());
        this::send(self.report, BoundAt(socket.local_addr()))?;
        let mut sent = 0;
        for _ in 0..rounds {
            socket.active_once();
            match recv!(UdpEvent, timeout = PATIENCE)? {
                UdpEvent::Datagram {
                    socket: id,
                    from,
                    bytes,
                } => {
                    assert_eq!(id, socket.id());
                    let n = yield_cmd!(socket.send_to(bytes.to_ascii_uppercase(), from))?;
                    assert_eq!(n, bytes.len());
                    sent += n;
                }
                UdpEvent::Error { error, .. } => return Err(error.into()),
            }
        }
        Ok(sent)
    }
}

#[test]
fn a_datagram_reaches_the_owner_and_its_reply_comes_back() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let upper = Upper {
        handle: scheduler.handle(),
        report: inbox.pid(),
    };
    let pid = scheduler.spawn(upper, Upper::SERVE, (3_usize,)).unwrap();
    let BoundAt(addr) = inbox_recv::<BoundAt>(&inbox);
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    let peer = udp_peer();
    let mut total = 0;
    for word in ["ping", "", "hello there"] {
        peer.send_to(word.as_bytes(), addr).unwrap();
        let mut answer = [0; 64];
        let (n, from) = peer.recv_from(&mut answer).expect("an answer in time");
        assert_eq!(from, addr);
        assert_eq!(&answer[..n], word.to_ascii_uppercase().as_bytes());
        total += n;
    }
    let sent = scheduler.wait_timeout(pid, PATIENCE).unwrap();
    assert_eq!(sent.downcast::<usize>().unwrap(), total);
}

/// Receives a socket, then asks for as many datagrams as it is told, and reports
/// what came: the datagrams asked for, and whether anything came beyond them.
struct DatagramSipper {
    report: Pid,
}

#[derive(Debug)]
struct SippedDatagrams {
    datagrams: Vec<Vec<u8>>,
    extra: bool,
}

#[process]
impl DatagramSipper {
    #[entry]
    fn sip(&mut self) -> Result<(), BoxError> {
        let socket = recv!(UdpSocket)?;
        assert_eq!(socket.owner(), Some(this::pid()), "handed over");
        loop {
            let Permit(n) = recv!(Permit)?;
            for _ in 0..n {
                socket.active_once();
            }
            let mut datagrams = Vec::new();
            for _ in 0..n {
                match recv!(UdpEvent, timeout = PATIENCE)? {
                    UdpEvent::Datagram { bytes, .. } => datagrams.push(bytes),
                    other => return Err(format!("expected a datagram, got {other:?}").into()),
                }
            }
            let extra = match recv!(UdpEvent, timeout = Duration::from_millis(100)) {
                Err(RecvError::Timeout) => false,
                Ok(_) => true,
                Err(other) => return Err(other.into()),
            };
            this::send(self.report, SippedDatagrams { datagrams, extra })?;
        }
    }
}

#[test]
fn active_once_delivers_one_datagram_per_call_and_no_more() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let socket = UdpSocket::bind(&scheduler.handle(), "127.0.0.1:0").unwrap();
    assert_eq!(socket.owner(), None, "bound outside a process");
    // Far more than is asked for, all waiting before the first call (a send on
    // loopback is in the receiver's buffer when it returns).
    let peer = udp_peer();
    let sent: Vec<Vec<u8>> = (0..10).map(|n| format!("datagram {n}").into()).collect();
    for datagram in &sent {
        peer.send_to(datagram, socket.local_addr()).unwrap();
    }
    let sipper = DatagramSipper {
        report: inbox.pid(),
    };
    let pid = scheduler.spawn(sipper, DatagramSipper::SIP, ()).unwrap();
    socket.set_owner(pid);
    assert_eq!(socket.owner(), Some(pid));
    scheduler.send(pid, socket).unwrap();

    let mut received = Vec::new();
    for n in [1, 3, 2] {
        scheduler.send(pid, Permit(n)).unwrap();
        let sipped = inbox_recv::<SippedDatagrams>(&inbox);
        assert_eq!(sipped.datagrams.len(), n, "one datagram per call");
        assert!(!sipped.extra, "a datagram came that was not asked for");
        received.extend(sipped.datagrams);
    }
    // Whole, one per message, in the order sent.
    assert_eq!(received, sent[..6]);
}

/// Binds a socket of its own, tells where, and waits (for ever).
struct UdpIdle {
    handle: Handle,
    report: Pid,
}

#[process]
impl UdpIdle {
    #[entry]
    fn idle(&mut self) -> Result<(), BoxError> {
        let socket = UdpSocket::bind(&self.handle, "127.0.0.1:0")?;
        socket.set_owner(this::pid());
        socket.active_once(); // a receive under way must not keep it open
        this::send(self.report, BoundAt(socket.local_addr()))?;
        recv!(String)?;
        Ok(())
    }
}

/// Binds `addr` again with a std socket, retrying for a while: the port is free
/// once the socket is closed.
fn rebind(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        match std::net::UdpSocket::bind(addr) {
            Err(error)
                if error.kind() == ErrorKind::AddrInUse && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            bound => return bound,
        }
    }
}

#[test]
fn killing_the_owning_process_closes_its_udp_socket() {
    let scheduler = scheduler();
    let inbox = scheduler.inbox().unwrap();
    let idle = UdpIdle {
        handle: scheduler.handle(),
        report: inbox.pid(),
    };
    let pid = scheduler.spawn(idle, UdpIdle::IDLE, ()).unwrap();
    let BoundAt(addr) = inbox_recv::<BoundAt>(&inbox);
    assert_eq!(
        std::net::UdpSocket::bind(addr).unwrap_err().kind(),
        ErrorKind::AddrInUse,
        "open while its process lives"
    );
    let down = scheduler.monitor(pid);
    scheduler.kill(pid).unwrap();
    assert_eq!(
        down.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Killed
    );
    rebind(addr).expect("the port is free again");
}

#[test]
fn dropping_a_udp_socket_closes_it_at_once() {
    let scheduler = scheduler();
    let socket = UdpSocket::bind(&scheduler.handle(), "127.0.0.1:0").unwrap();
    let addr = socket.local_addr();
    socket.active_once(); // its receiver waits for a datagram
    drop(socket);
    // No retry: the socket is closed when the drop returns.
    std::net::UdpSocket::bind(addr).expect("the port is free again");
}

/// Sends `bytes` to `to` through a socket of its own (or, with `drop_first`,
/// through one dropped before the send), and returns what the failure says.
struct SendInVain {
    handle: Handle,
}

#[process]
impl SendInVain {
    #[entry]
    fn send(&mut self, to: SocketAddr, drop_first: bool) -> Result<(ErrorKind, String), BoxError> {
        // No owner: it only sends.
        let socket = UdpSocket::bind(&self.handle, "127.0.0.1:0")?;
        let send = socket.send_to("anyone there?", to);
        if drop_first {
            drop(socket);
        }
        match yield_cmd!(send) {
            Ok(n) => Err(format!("sent {n} bytes").into()),
            Err(YieldError::Failed { source, .. }) => {
                let error = source
                    .downcast_ref::<std::io::Error>()
                    .ok_or("the source is not an io::Error")?;
                Ok((error.kind(), error.to_string()))
            }
            Err(other) => Err(other.into()),
        }
    }
}

#[test]
fn a_udp_send_the_system_refuses_fails_with_its_io_error() {
    let scheduler = scheduler();
    let spawn = |to: SocketAddr, drop_first: bool| {
        let sender = SendInVain {
            handle: scheduler.handle(),
        };
        let pid = scheduler
            .spawn(sender, SendInVain::SEND, (to, drop_first))
            .unwrap();
        scheduler
            .wait_timeout(pid, PATIENCE)
            .unwrap()
            .downcast::<(ErrorKind, String)>()
            .unwrap()
    };
    // An IPv6 address from an IPv4 socket: no system sends that (the kind is the
    // system's own, not asserted).
    let v6: SocketAddr = "[::1]:9".parse().unwrap();
    let (_, message) = spawn(v6, false);
    assert!(
        message.contains(&format!("cannot send to {v6}")),
        "{message}"
    );
    // Through a socket dropped before the send: ours to say.
    let v4: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let (kind, message) = spawn(v4, true);
    assert_eq!(kind, ErrorKind::NotConnected, "{message}");
    assert!(message.contains("is closed"), "{message}");
}
