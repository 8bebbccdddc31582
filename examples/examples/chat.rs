//! A chat room: a room process and member processes that talk by PID. Members join
//! and leave; the room relays each line to everyone else in it and tells them who
//! came and went. The main thread plays the people typing.
//!
//! `cargo run --example chat`

use std::sync::mpsc;
use std::time::Duration;

use wsched::prelude::*;
use wsched::{Scheduler, SendError};

// What members send the room.
/// "Add me, under this nick."
struct Join {
    member: Pid,
    nick: String,
}
/// "Take me out."
struct Leave {
    member: Pid,
}
/// "Tell the others."
struct Say {
    member: Pid,
    text: String,
}

// What the room sends members.
/// Everything a member hears, to keep in its transcript.
struct Heard(String);
/// The room's answer to `Leave`: nothing more will come after it.
struct Goodbye;

// What the main thread (the person at the keyboard) sends a member.
/// Type a line.
struct Type(String);
/// Close the window.
struct Quit;

/// The room: who is in, and what it relayed.
struct Room {
    members: Vec<(Pid, String)>,
    /// The room's log, for the main thread to follow along.
    log: mpsc::Sender<String>,
}

// ANCHOR: room
#[process]
impl Room {
    /// Runs until the last member leaves; returns how many lines it relayed.
    #[entry]
    fn open(&mut self) -> Result<usize, BoxError> {
        let mut relayed = 0;
        loop {
            let message = recv!()?;
            let payload = message.payload;
            let event = if let Some(join) = payload.downcast_ref::<Join>() {
                let present: Vec<&str> = self.members.iter().map(|(_, n)| n.as_str()).collect();
                let welcome = if present.is_empty() {
                    "you are alone here".to_string()
                } else {
                    format!("here: {}", present.join(", "))
                };
                this::send(join.member, Heard(welcome))?;
                self.broadcast(join.member, &format!("* {} joined", join.nick))?;
                self.members.push((join.member, join.nick.clone()));
                format!("{} joined", join.nick)
            } else if let Some(say) = payload.downcast_ref::<Say>() {
                let nick = self.nick(say.member);
                self.broadcast(say.member, &format!("<{nick}> {}", say.text))?;
                relayed += 1;
                format!("{nick}: {}", say.text)
            } else if let Some(leave) = payload.downcast_ref::<Leave>() {
                let nick = self.nick(leave.member);
                self.members.retain(|(pid, _)| *pid != leave.member);
                this::send(leave.member, Goodbye)?;
                self.broadcast(leave.member, &format!("* {nick} left"))?;
                format!("{nick} left")
            } else {
                continue; // not for a room
            };
            println!("room: {event}");
            let _ = self.log.send(event);
            if self.members.is_empty() {
                return Ok(relayed);
            }
        }
    }
}
// ANCHOR_END: room

// Plain methods, called from the entry between suspension points.
impl Room {
    fn nick(&self, member: Pid) -> String {
        let found = self.members.iter().find(|(pid, _)| *pid == member);
        found.map_or_else(|| member.to_string(), |(_, nick)| nick.clone())
    }

    /// Sends `line` to every member but `except`.
    fn broadcast(&self, except: Pid, line: &str) -> Result<(), SendError> {
        for (pid, _) in self.members.iter().filter(|(pid, _)| *pid != except) {
            this::send(*pid, Heard(line.to_string()))?;
        }
        Ok(())
    }
}

/// A member: its nick, and everything it heard.
struct Member {
    nick: String,
    transcript: Vec<String>,
}

#[process]
impl Member {
    /// Joins `room`, types what it is told to, and leaves when told to; returns
    /// its transcript.
    #[entry]
    fn chat(&mut self, room: Pid) -> Result<Vec<String>, BoxError> {
        let me = this::pid();
        this::send(
            room,
            Join {
                member: me,
                nick: self.nick.clone(),
            },
        )?;
        loop {
            let message = recv!()?;
            let payload = message.payload;
            if let Some(Heard(line)) = payload.downcast_ref::<Heard>() {
                self.transcript.push(line.clone());
            } else if let Some(Type(text)) = payload.downcast_ref::<Type>() {
                let text = text.clone();
                this::send(room, Say { member: me, text })?;
            } else if payload.is::<Quit>() {
                this::send(room, Leave { member: me })?;
                // The room answers in order: what it sent before the Goodbye is
                // still heard, nothing comes after.
                loop {
                    let payload = recv!()?.payload;
                    if payload.is::<Goodbye>() {
                        return Ok(std::mem::take(&mut self.transcript));
                    }
                    if let Ok(Heard(line)) = payload.downcast::<Heard>() {
                        self.transcript.push(line);
                    } // anything else was typed after quitting: ignored
                }
            }
        }
    }
}

fn member(nick: &str) -> Member {
    Member {
        nick: nick.to_string(),
        transcript: Vec::new(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder().workers(2).build()?;
    let (log, room_log) = mpsc::channel();
    let room = scheduler.spawn(
        Room {
            members: Vec::new(),
            log,
        },
        "open",
        (),
    )?;
    // Each step waits for the room to log the last action before the next one, as
    // a person reads before typing: the conversation comes out the same every run.
    let saw = |what: &str| -> Result<(), String> {
        match room_log.recv_timeout(Duration::from_secs(10)) {
            Ok(event) if event == what => Ok(()),
            Ok(event) => Err(format!("expected {what:?}, the room logged {event:?}")),
            Err(e) => Err(format!("expected {what:?}: {e}")),
        }
    };

    let alice = scheduler.spawn(member("alice"), "chat", (room,))?;
    saw("alice joined")?;
    let bob = scheduler.spawn(member("bob"), "chat", (room,))?;
    saw("bob joined")?;
    scheduler.send(alice, Type("hi bob!".into()))?;
    saw("alice: hi bob!")?;
    scheduler.send(bob, Type("hello alice".into()))?;
    saw("bob: hello alice")?;
    let carol = scheduler.spawn(member("carol"), "chat", (room,))?;
    saw("carol joined")?;
    scheduler.send(alice, Quit)?;
    saw("alice left")?;
    scheduler.send(carol, Type("did I miss anything?".into()))?;
    saw("carol: did I miss anything?")?;
    scheduler.send(bob, Quit)?;
    saw("bob left")?;
    scheduler.send(carol, Quit)?;
    saw("carol left")?;

    for (nick, pid) in [("alice", alice), ("bob", bob), ("carol", carol)] {
        let transcript = scheduler.wait(pid)?.downcast::<Vec<String>>()?;
        println!("\n{nick} ({pid}) heard:");
        for line in transcript {
            println!("  {line}");
        }
    }
    let relayed = scheduler.wait(room)?.downcast::<usize>()?;
    println!("\nthe room closed when the last member left; it relayed {relayed} lines");

    scheduler.shutdown(Duration::from_secs(1));
    Ok(())
}
