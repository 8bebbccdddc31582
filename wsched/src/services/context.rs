//! A process's [`Context`](crate::Context) on a scheduler: what each of its methods
//! does, through the process's own cell (the testing harness has its own backend).

use std::collections::VecDeque;
use std::time::Duration;

use crate::engine::cell::{Header, NewProcess};
use crate::engine::context::{Backend, MonitorRef};
use crate::engine::handle::Handle;
use crate::engine::held::MessageCount;
use crate::engine::process::Message;
use crate::error::{
    CancelError, RegisterError, SendError, SendNamedError, SpawnError, TimedSendError,
};
use crate::payload::Payload;
use crate::pid::Pid;
use crate::services::timed;
use crate::time::timed_ref::{Repeat, TimerRef};

/// A process's `Context` talks to the scheduler through the process's own cell.
impl Backend for Header {
    fn spawn(&self, parent: Option<Pid>, process: NewProcess) -> Result<Pid, SpawnError> {
        let handle = self.handle();
        handle.shared().spawn(handle, parent, process)
    }

    fn spawns_at_yield(&self) -> bool {
        // SAFETY: asked only from a step of this process (see the trait), whose
        // runner owns it.
        self.handle().shared().handlers().spawns_at_yield() && !unsafe { self.yields_watched() }
    }

    #[inline]
    fn send(&self, from: Option<Pid>, to: Pid, payload: Payload) -> Result<(), SendError> {
        self.handle().shared().send_message(from, to, payload)
    }

    fn cancel(&self, _from: Option<Pid>, pid: Pid) -> Result<(), CancelError> {
        self.handle().shared().cancel(pid)
    }

    fn kill(&self, _from: Option<Pid>, pid: Pid) -> Result<(), CancelError> {
        self.handle().shared().kill(pid)
    }

    fn register(&self, name: &str, pid: Pid) -> Result<(), RegisterError> {
        let shared = self.handle().shared();
        shared.names().register(shared, name, pid)
    }

    fn unregister(&self, name: &str) -> Option<Pid> {
        let shared = self.handle().shared();
        shared.names().unregister(shared, name)
    }

    fn whereis(&self, name: &str) -> Option<Pid> {
        let shared = self.handle().shared();
        shared.names().whereis(shared, name)
    }

    fn send_named(
        &self,
        from: Option<Pid>,
        name: &str,
        payload: Payload,
    ) -> Result<(), SendNamedError> {
        let shared = self.handle().shared();
        shared.names().send(shared, from, name, payload)
    }

    fn send_timed(
        &self,
        from: Option<Pid>,
        to: Pid,
        delay: Duration,
        repeat: Repeat,
    ) -> Result<TimerRef, TimedSendError> {
        timed::arm(self.handle(), from, to, delay, repeat)
    }

    fn monitor(&self, watcher: Pid, target: Pid) -> MonitorRef {
        let shared = self.handle().shared();
        shared
            .monitors()
            .monitor_from_process(shared, watcher, target)
    }

    fn demonitor(&self, monitor: MonitorRef) -> bool {
        self.handle()
            .shared()
            .monitors()
            .demonitor(self.handle().shared(), monitor)
    }

    fn link(&self, me: Pid, other: Pid) {
        let shared = self.handle().shared();
        shared.monitors().link(shared, me, other);
    }

    fn unlink(&self, me: Pid, other: Pid) {
        self.handle()
            .shared()
            .monitors()
            .unlink(self.handle().shared(), me, other);
    }

    fn trap_exits(&self, me: Pid, on: bool) {
        self.handle().shared().monitors().trap_exits(me, on);
    }

    fn scheduler(&self) -> Option<Handle> {
        Some(self.handle().clone())
    }

    fn dead_letters(&self, to: Pid, messages: &mut VecDeque<Message>) {
        self.handle()
            .shared()
            .dead_letters
            .unreceived(to, messages.drain(..));
    }

    fn publish_held(&self, pid: Pid, held: Vec<MessageCount>) {
        self.handle().shared().held.publish(pid, held);
    }

    fn report_held(&self, held: usize) {
        self.set_held(held);
    }
}
