//! The chat room over real TCP: a room process, and a process per client
//! connection, spawned by a listener. A client speaks a line protocol: `/nick ada`
//! joins the room as ada, any other line is said to the room (the others read
//! `ada: hello`), `/quit` leaves. A connection that drops without `/quit` is noticed
//! (its process reads the end of the stream) and the room tells the others.
//!
//! The program drives the server with four real TCP clients (`std::net` sockets,
//! each read by a thread of its own) through a conversation, checks what each of
//! them reads, and exits.
//!
//! `cargo run --example chat_tcp`

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use wsched::io::tcp::{Listener, TcpConn, TcpEvent};
use wsched::prelude::*;
use wsched::Scheduler;

/// How long a client waits for a line before the program fails (only reached
/// when something is wrong).
const PATIENCE: Duration = Duration::from_secs(10);

// What sessions tell the room.
/// "Add me, under this nick."
struct Join {
    session: Pid,
    nick: String,
}
/// "Tell the others."
struct Say {
    session: Pid,
    text: String,
}
/// "Take me out": the client quit, or its connection dropped.
struct Leave {
    session: Pid,
    dropped: bool,
}

/// What the room tells a session: a line for its client.
struct Line(String);

/// The room: who is in, and the monitor it holds on each.
#[derive(Default)]
struct Room {
    members: Vec<(Pid, String, MonitorRef)>,
}

#[process]
impl Room {
    /// Runs until the scheduler shuts down.
    #[entry]
    fn open(&mut self) -> Result<(), BoxError> {
        loop {
            let payload = recv!()?.payload;
            if let Some(join) = payload.downcast_ref::<Join>() {
                let here: Vec<&str> = self.members.iter().map(|m| m.1.as_str()).collect();
                let welcome = if here.is_empty() {
                    format!("* hello {}, you are alone here", join.nick)
                } else {
                    format!("* hello {}; here: {}", join.nick, here.join(", "))
                };
                let _ = this::send(join.session, Line(welcome));
                self.broadcast(join.session, &format!("* {} joined", join.nick));
                // A Down comes if the session ends without leaving (it failed).
                let monitor = this::monitor(join.session);
                self.members
                    .push((join.session, join.nick.clone(), monitor));
            } else if let Some(say) = payload.downcast_ref::<Say>() {
                if let Some(nick) = self.nick(say.session) {
                    self.broadcast(say.session, &format!("{nick}: {}", say.text));
                }
            } else if let Some(leave) = payload.downcast_ref::<Leave>() {
                if let Some((_, nick, monitor)) = self.remove(leave.session) {
                    this::demonitor(monitor);
                    let how = if leave.dropped { "dropped out" } else { "left" };
                    self.broadcast(leave.session, &format!("* {nick} {how}"));
                }
            } else if let Some(down) = payload.downcast_ref::<Down>() {
                if let Some((_, nick, _)) = self.remove(down.pid) {
                    self.broadcast(down.pid, &format!("* {nick} is gone ({})", down.reason));
                }
            }
        }
    }
}

impl Room {
    fn nick(&self, session: Pid) -> Option<String> {
        let member = self.members.iter().find(|m| m.0 == session)?;
        Some(member.1.clone())
    }

    fn remove(&mut self, session: Pid) -> Option<(Pid, String, MonitorRef)> {
        let at = self.members.iter().position(|m| m.0 == session)?;
        Some(self.members.remove(at))
    }

    /// Sends `line` to every member but `except`. A send fails only to a session
    /// that has just ended; its `Leave` or `Down` is on the way.
    fn broadcast(&self, except: Pid, line: &str) {
        for (pid, _, _) in self.members.iter().filter(|m| m.0 != except) {
            let _ = this::send(*pid, Line(line.to_string()));
        }
    }
}

/// One client connection's process.
struct Session {
    room: Pid,
    /// Set by `/nick`.
    nick: Option<String>,
    /// Bytes read and not yet a whole line: TCP carries bytes, not lines, so a
    /// line may come in several chunks, and a chunk may hold several lines.
    partial: Vec<u8>,
}

/// What a session waits for: its connection, or the room.
enum Input {
    Net(TcpEvent),
    Room(String),
}

/// What a line from the client asks for.
enum Request {
    Nick(String),
    Quit,
    Say(String),
}

// ANCHOR: session
#[process]
impl Session {
    #[entry]
    fn serve(&mut self, conn: TcpConn) -> Result<(), BoxError> {
        let me = this::pid();
        conn.set_nodelay(true)?;
        yield_cmd!(conn.write("* welcome! say /nick NAME to join\n"))?;
        // One chunk asked for at a time, always one: so the end of the stream is
        // seen even while the client is silent.
        conn.active_once();
        loop {
            let input = recv! {
                event: TcpEvent => Input::Net(event),
                Line(text) => Input::Room(text),
            }?;
            let chunk = match input {
                Input::Room(text) => {
                    yield_cmd!(conn.write(text + "\n"))?;
                    continue;
                }
                Input::Net(TcpEvent::Data { bytes, .. }) => bytes,
                Input::Net(TcpEvent::Closed { .. } | TcpEvent::Error { .. }) => {
                    // Gone without a /quit.
                    if self.nick.is_some() {
                        this::send(
                            self.room,
                            Leave {
                                session: me,
                                dropped: true,
                            },
                        )?;
                    }
                    return Ok(());
                }
            };
            self.partial.extend(chunk);
            while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.partial.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line).trim_end().to_string();
                match (Self::parse(&line), &self.nick) {
                    (Request::Nick(nick), None) => {
                        this::send(
                            self.room,
                            Join {
                                session: me,
                                nick: nick.clone(),
                            },
                        )?;
                        self.nick = Some(nick);
                    }
                    (Request::Nick(_), Some(nick)) => {
                        yield_cmd!(conn.write(format!("* you are {nick} already\n")))?;
                    }
                    (Request::Say(_), None) => {
                        yield_cmd!(conn.write("* say /nick NAME first\n"))?;
                    }
                    (Request::Say(text), Some(_)) => {
                        this::send(self.room, Say { session: me, text })?;
                    }
                    (Request::Quit, nick) => {
                        if nick.is_some() {
                            this::send(
                                self.room,
                                Leave {
                                    session: me,
                                    dropped: false,
                                },
                            )?;
                        }
                        let name = nick.as_deref().unwrap_or("stranger");
                        yield_cmd!(conn.write(format!("* bye {name}\n")))?;
                        return Ok(()); // the connection closes with the process
                    }
                }
            }
            conn.active_once();
        }
    }
}
// ANCHOR_END: session

impl Session {
    fn parse(line: &str) -> Request {
        match line.split_once(' ') {
            Some(("/nick", nick)) if !nick.trim().is_empty() => Request::Nick(nick.trim().into()),
            _ if line == "/quit" => Request::Quit,
            _ => Request::Say(line.to_string()),
        }
    }
}

/// A client: a real TCP connection, written from the main thread and read by a
/// thread of its own, which passes each line on (and `None` at the end of the
/// stream), so the main thread can wait for a line with a timeout.
struct Client {
    name: &'static str,
    stream: TcpStream,
    lines: mpsc::Receiver<Option<String>>,
    heard: Vec<String>,
}

impl Client {
    fn connect(server: SocketAddr, name: &'static str) -> Result<Self, String> {
        let stream = TcpStream::connect(server).map_err(|e| format!("{name}: connect: {e}"))?;
        let reader = stream.try_clone().map_err(|e| format!("{name}: {e}"))?;
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(reader).lines() {
                let Ok(line) = line else { break };
                if tx.send(Some(line)).is_err() {
                    return;
                }
            }
            let _ = tx.send(None);
        });
        Ok(Self {
            name,
            stream,
            lines,
            heard: Vec::new(),
        })
    }

    /// Writes `text` as it is (a line ends with `\n`).
    fn type_raw(&mut self, text: &str) -> Result<(), String> {
        self.stream
            .write_all(text.as_bytes())
            .map_err(|e| format!("{}: write: {e}", self.name))
    }

    fn say(&mut self, line: &str) -> Result<(), String> {
        println!("{:>5} > {line}", self.name);
        self.type_raw(&format!("{line}\n"))
    }

    /// Waits for the next line and checks it is `expected`.
    fn hears(&mut self, expected: &str) -> Result<(), String> {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(Some(line)) if line == expected => {
                println!("{:>5} < {line}", self.name);
                self.heard.push(line);
                Ok(())
            }
            Ok(Some(line)) => Err(format!(
                "{} expected {expected:?}, read {line:?}",
                self.name
            )),
            Ok(None) => Err(format!(
                "{} expected {expected:?}: the server hung up",
                self.name
            )),
            Err(e) => Err(format!("{} expected {expected:?}: {e}", self.name)),
        }
    }

    /// Drops the connection, without a word to the server. (Dropping the stream
    /// would not do: the reader thread holds a clone of it.)
    fn drop_connection(self) -> Result<(), String> {
        self.stream
            .shutdown(std::net::Shutdown::Both)
            .map_err(|e| format!("{}: shutdown: {e}", self.name))
    }

    /// Waits for the server to close the connection.
    fn hears_the_end(&mut self) -> Result<(), String> {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(None) => {
                println!("{:>5} < (the server closed the connection)", self.name);
                Ok(())
            }
            Ok(Some(line)) => Err(format!("{} expected the end, read {line:?}", self.name)),
            Err(e) => Err(format!("{} expected the end: {e}", self.name)),
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder().workers(2).build()?;
    let room = scheduler.spawn(Room::default(), Room::OPEN, ())?;
    let listener = Listener::bind(
        &scheduler.handle(),
        "127.0.0.1:0",
        move |_peer| Session {
            room,
            nick: None,
            partial: Vec::new(),
        },
        Session::SERVE,
    )?;
    let server = listener.local_addr();
    println!("the chat listens on port {}\n", server.port());
    const BANNER: &str = "* welcome! say /nick NAME to join";

    let mut ada = Client::connect(server, "ada")?;
    ada.hears(BANNER)?;
    ada.say("/nick ada")?;
    ada.hears("* hello ada, you are alone here")?;

    let mut bob = Client::connect(server, "bob")?;
    bob.hears(BANNER)?;
    bob.say("/nick bob")?;
    bob.hears("* hello bob; here: ada")?;
    ada.hears("* bob joined")?;

    ada.say("hello bob")?;
    bob.hears("ada: hello bob")?;
    // A line in two pieces: the session puts it together.
    println!("  bob > hi a… (the rest of the line comes later)");
    bob.type_raw("hi a")?;
    bob.say("da")?;
    ada.hears("bob: hi ada")?;

    let mut carol = Client::connect(server, "carol")?;
    carol.hears(BANNER)?;
    carol.say("anyone here?")?;
    carol.hears("* say /nick NAME first")?;
    // Two lines in one write.
    println!("carol > /nick carol + hi all (in one write)");
    carol.type_raw("/nick carol\nhi all\n")?;
    carol.hears("* hello carol; here: ada, bob")?;
    for member in [&mut ada, &mut bob] {
        member.hears("* carol joined")?;
        member.hears("carol: hi all")?;
    }

    let mut dave = Client::connect(server, "dave")?;
    dave.hears(BANNER)?;
    dave.say("/nick dave")?;
    dave.hears("* hello dave; here: ada, bob, carol")?;
    for member in [&mut ada, &mut bob, &mut carol] {
        member.hears("* dave joined")?;
    }
    // Dave's connection drops: no /quit.
    println!(" dave   (the connection drops)");
    dave.drop_connection()?;
    for member in [&mut ada, &mut bob, &mut carol] {
        member.hears("* dave dropped out")?;
    }

    bob.say("/quit")?;
    bob.hears("* bye bob")?;
    bob.hears_the_end()?;
    ada.hears("* bob left")?;
    carol.hears("* bob left")?;

    carol.say("just us now")?;
    ada.hears("carol: just us now")?;
    ada.say("/quit")?;
    ada.hears("* bye ada")?;
    ada.hears_the_end()?;
    carol.hears("* ada left")?;

    println!();
    for client in [&ada, &bob, &carol] {
        println!("{} read {} lines:", client.name, client.heard.len());
        for line in &client.heard {
            println!("  {line}");
        }
    }
    listener.close();
    scheduler.shutdown(Duration::from_secs(1));
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    run()
}

#[cfg(test)]
mod tests {
    #[test]
    fn several_clients_chat_over_tcp() {
        super::run().unwrap();
    }
}
