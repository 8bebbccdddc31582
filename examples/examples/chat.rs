//! A chat room: a room process and member processes that talk by PID. Members join
//! and leave; the room relays each line to everyone else in it and tells them who
//! came and went. It monitors its members, so one that ends without leaving (here:
//! killed) is dropped too. The main thread plays the people typing.
//!
//! `cargo run --example chat`

use std::sync::mpsc;
use std::time::Duration;

use wsched::prelude::*;
use wsched::{ExitReason, Scheduler};

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

/// The room: who is in (with the monitor it holds on each), and its log.
struct Room {
    members: Vec<(Pid, String, MonitorRef)>,
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
                let present: Vec<&str> = self.members.iter().map(|m| m.1.as_str()).collect();
                let welcome = if present.is_empty() {
                    "you are alone here".to_string()
                } else {
                    format!("here: {}", present.join(", "))
                };
                this::send(join.member, Heard(welcome))?;
                self.broadcast(join.member, &format!("* {} joined", join.nick));
                // A Down message comes if the member ends without leaving.
                let monitor = this::monitor(join.member);
                self.members.push((join.member, join.nick.clone(), monitor));
                format!("{} joined", join.nick)
            } else if let Some(say) = payload.downcast_ref::<Say>() {
                let nick = self.nick(say.member);
                self.broadcast(say.member, &format!("<{nick}> {}", say.text));
                relayed += 1;
                format!("{nick}: {}", say.text)
            } else if let Some(leave) = payload.downcast_ref::<Leave>() {
                let Some((_, nick, monitor)) = self.remove(leave.member) else {
                    continue;
                };
                // It is still live (it waits for the Goodbye): no Down will come.
                this::demonitor(monitor);
                this::send(leave.member, Goodbye)?;
                self.broadcast(leave.member, &format!("* {nick} left"));
                format!("{nick} left")
            } else if let Some(down) = payload.downcast_ref::<Down>() {
                let Some((_, nick, _)) = self.remove(down.pid) else {
                    continue;
                };
                self.broadcast(down.pid, &format!("* {nick} dropped out"));
                format!("{nick} dropped out: {}", down.reason)
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
        let found = self.members.iter().find(|m| m.0 == member);
        found.map_or_else(|| member.to_string(), |m| m.1.clone())
    }

    fn remove(&mut self, member: Pid) -> Option<(Pid, String, MonitorRef)> {
        let at = self.members.iter().position(|m| m.0 == member)?;
        Some(self.members.remove(at))
    }

    /// Sends `line` to every member but `except`. A send fails only to a member
    /// that has just ended; its `Down` is on the way, and drops it.
    fn broadcast(&self, except: Pid, line: &str) {
        for (pid, _, _) in self.members.iter().filter(|m| m.0 != except) {
            let _ = this::send(*pid, Heard(line.to_string()));
        }
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
    let dave = scheduler.spawn(member("dave"), "chat", (room,))?;
    saw("dave joined")?;
    scheduler.kill(dave)?; // dave's window crashes: he never says goodbye
    saw("dave dropped out: killed: stopped before it finished")?;
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
    let dave_ended = scheduler.wait(dave).unwrap_err().exit_reason();
    assert_eq!(dave_ended, Some(ExitReason::Killed));
    println!("\ndave ({dave}) left no transcript: he was killed");
    let relayed = scheduler.wait(room)?.downcast::<usize>()?;
    println!("\nthe room closed when the last member left; it relayed {relayed} lines");

    scheduler.shutdown(Duration::from_secs(1));
    Ok(())
}
