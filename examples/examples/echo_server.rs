//! An echo server over TCP: a listener process accepts connections and spawns a
//! process for each, which reads a chunk at a time — only when it asks for one, so
//! a fast client cannot flood it — and writes it back, until the client closes.
//! The program then plays three clients itself, with plain `std::net` sockets on
//! threads of their own, checks their echoes, closes the listener and exits.
//!
//! `cargo run --example echo_server`

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use wsched::io::tcp::{Listener, TcpConn, TcpEvent};
use wsched::prelude::*;
use wsched::{ExitReason, Scheduler};

/// How long a client waits for an answer before it gives up (only reached when
/// something is wrong).
const PATIENCE: Duration = Duration::from_secs(10);

/// One connection's process.
struct Echo {
    /// Where to report what it served, when its client is gone.
    log: Pid,
}

/// What a connection's process reports when its client closes.
struct Served {
    peer: SocketAddr,
    chunks: usize,
    bytes: usize,
}

// ANCHOR: echo
#[process]
impl Echo {
    #[entry]
    fn serve(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        let (mut chunks, mut bytes) = (0, 0);
        loop {
            conn.active_once(); // read one more chunk, and send it to me
            match recv!(TcpEvent)? {
                TcpEvent::Data { bytes: chunk, .. } => {
                    chunks += 1;
                    bytes += chunk.len();
                    yield_cmd!(conn.write(chunk))?; // suspends until it is all written
                }
                TcpEvent::Closed { .. } => break,
                TcpEvent::Error { error, .. } => return Err(error.into()),
            }
        }
        let peer = conn.peer_addr();
        this::send(
            self.log,
            Served {
                peer,
                chunks,
                bytes,
            },
        )?;
        Ok(()) // the connection closes with the process
    }
}
// ANCHOR_END: echo

/// A client: sends `lines` one at a time, reading each echo back before the next,
/// then closes its side and reads the end of the stream. Returns its address.
fn client(server: SocketAddr, name: &str, lines: &[&str]) -> Result<SocketAddr, String> {
    let fail = |what: &str, e: std::io::Error| format!("{name}: {what}: {e}");
    let mut stream = TcpStream::connect(server).map_err(|e| fail("connect", e))?;
    stream
        .set_read_timeout(Some(PATIENCE))
        .map_err(|e| fail("timeout", e))?;
    for line in lines {
        let line = format!("{name}: {line}\n");
        stream
            .write_all(line.as_bytes())
            .map_err(|e| fail("write", e))?;
        let mut echo = vec![0; line.len()];
        stream.read_exact(&mut echo).map_err(|e| fail("read", e))?;
        if echo != line.as_bytes() {
            return Err(format!(
                "{name}: sent {line:?}, got back {:?}",
                String::from_utf8_lossy(&echo)
            ));
        }
    }
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| fail("shutdown", e))?;
    let mut rest = Vec::new();
    stream
        .read_to_end(&mut rest)
        .map_err(|e| fail("read the end", e))?;
    if !rest.is_empty() {
        return Err(format!("{name}: {} bytes more than it sent", rest.len()));
    }
    println!("{name} got its {} lines back", lines.len());
    stream.local_addr().map_err(|e| fail("address", e))
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder().workers(2).build()?;
    let log = scheduler.inbox()?;
    let log_pid = log.pid();
    // Port 0: any free port; the listener says which.
    let listener = Listener::bind(
        &scheduler.handle(),
        "127.0.0.1:0",
        move |_peer| Echo { log: log_pid },
        Echo::SERVE,
    )?;
    let server = listener.local_addr();
    println!("listening on port {} as {}", server.port(), listener.pid());

    let scripts: [(&str, &[&str]); 3] = [
        ("ada", &["hello", "is this thing on?", "bye"]),
        ("bob", &["ping", "ping again"]),
        ("eve", &["one", "two", "three", "four"]),
    ];
    let clients: Vec<_> = scripts
        .into_iter()
        .map(|(name, lines)| thread::spawn(move || client(server, name, lines)))
        .collect();
    let mut addrs = Vec::new();
    for client in clients {
        addrs.push(client.join().expect("a client thread")?);
    }

    let mut total = 0;
    for _ in 0..addrs.len() {
        let served = log.recv::<Served>(PATIENCE)?;
        if !addrs.contains(&served.peer) {
            return Err(format!("a process served an unknown client {}", served.peer).into());
        }
        total += served.bytes;
        let chunks = served.chunks;
        println!(
            "  a process served {} bytes in {chunks} chunks",
            served.bytes
        );
    }
    println!(
        "the server echoed {total} bytes over {} connections",
        addrs.len()
    );

    let down = scheduler.monitor(listener.pid());
    listener.close();
    let ended = down
        .wait_timeout(PATIENCE)
        .ok_or("the listener did not end")?;
    assert_eq!(ended.reason, ExitReason::Normal);
    match TcpStream::connect(server) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            println!("listener closed: a new connection is refused")
        }
        other => return Err(format!("a connect after the close: {other:?}").into()),
    }
    scheduler.shutdown(Duration::from_secs(1));
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    run()
}

#[cfg(test)]
mod tests {
    #[test]
    fn three_clients_get_their_echoes() {
        super::run().unwrap();
    }
}
