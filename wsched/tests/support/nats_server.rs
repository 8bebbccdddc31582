//! A real `nats-server` with JetStream for tests, on a loopback port of its own and
//! a fresh store directory. Include it with
//! `#[path = "support/nats_server.rs"] mod nats_server;`.
//!
//! Nothing sleeps to let the server come up: [`NatsServer::start`] and
//! [`NatsServer::restart`] wait until the server's log says it is ready (it opens
//! its port once JetStream has recovered its store) and the port takes a
//! connection, up to a bound. The port alone is not enough: two tests starting
//! servers at once may be given the same free port before either server binds it,
//! and the port then takes connections for the server that won it, while the other
//! exits with `address already in use` (and is started again on another port).
#![allow(dead_code)]

use std::fs::{self, File};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the server may take to accept connections, or to exit when stopped: a
/// hang guard, not a measure of speed.
const PATIENCE: Duration = Duration::from_secs(10);

/// What the server logs once its client port is open (nats-server 2.9 and later).
const READY: &str = "Server is ready";

/// How many ports [`NatsServer::start`] tries: another process may take the one it
/// found free before the server binds it.
const PORT_TRIES: usize = 5;

/// A running `nats-server -js`, killed (and its store removed) on drop.
pub struct NatsServer {
    binary: PathBuf,
    port: u16,
    /// The store (`store/`) and the server's log (`server.log`).
    dir: PathBuf,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts a server on a free loopback port with a fresh store.
    ///
    /// # Panics
    /// When `nats-server` is not on the `PATH`, or does not come up.
    pub fn start() -> Self {
        let binary = find_binary();
        let dir = fresh_dir();
        let mut server = Self {
            binary,
            port: 0,
            dir,
            child: None,
        };
        for _ in 0..PORT_TRIES {
            server.port = free_port();
            match server.spawn() {
                Ok(()) => return server,
                Err(log) if log.contains("address already in use") => {
                    // Shown with the test's output if it fails.
                    eprintln!(
                        "nats-server: port {} was taken; trying another",
                        server.port
                    );
                }
                Err(log) => server.fail("did not come up", &log),
            }
        }
        server.fail(
            &format!("found no free port in {PORT_TRIES} tries"),
            &server.log(),
        )
    }

    /// The URL to connect to, `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Stops the server: asks it to shut down (SIGTERM, so that its store is
    /// written out as in a clean restart), and kills it if it has not exited
    /// within the bound. Waits for it. Does nothing if it is stopped.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let asked = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .is_ok_and(|status| status.success());
        let deadline = Instant::now() + PATIENCE;
        while asked && Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(_) => break,
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Stops the server and starts it again on the same port with the same store,
    /// as a restart in the middle of a run.
    ///
    /// # Panics
    /// When it does not come up again.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(log) = self.spawn() {
            self.fail("did not come up again after a restart", &log);
        }
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.dir.join("store"));
        command
    }

    /// Starts the server and waits until it says it is ready and its port accepts
    /// connections; its log if it exits or is not ready within the bound.
    fn spawn(&mut self) -> Result<(), String> {
        // The directory is this server's alone; made again if something swept the
        // temporary directory meanwhile (the log must have somewhere to go).
        create(&self.dir);
        let log = File::create(self.dir.join("server.log"))
            .unwrap_or_else(|err| panic!("cannot create {}: {err}", self.dir.display()));
        let stderr = log
            .try_clone()
            .unwrap_or_else(|err| panic!("cannot share the log file's handle: {err}"));
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {:?}: {err}", self.command()));
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let deadline = Instant::now() + PATIENCE;
        loop {
            // This server's own word first: the port may be another's (see above).
            if self.log().contains(READY)
                && TcpStream::connect_timeout(&address, Duration::from_millis(100)).is_ok()
            {
                self.child = Some(child);
                return Ok(());
            }
            let exited = matches!(child.try_wait(), Ok(Some(_)));
            if exited || Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(self.log());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn fail(&self, what: &str, log: &str) -> ! {
        panic!(
            "nats-server {what} within {PATIENCE:?}: {:?}\n--- its output ---\n{log}",
            self.command()
        )
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn find_binary() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("nats-server"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "nats-server is not on the PATH: install it: apt-get install nats-server \
                 (the project's .ci/run does)"
            )
        })
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|err| panic!("cannot bind a loopback port: {err}"))
}

/// A new, empty directory under the system's temporary directory.
fn fresh_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "wsched-nats-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    create(&dir);
    dir
}

fn create(dir: &Path) {
    fs::create_dir_all(dir).unwrap_or_else(|err| panic!("cannot create {}: {err}", dir.display()));
}
