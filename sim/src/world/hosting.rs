//! The core [`Session`](zkelect_core::Session) each zkelect process runs
//! on, driven as the library's pump drives it: the world's client library
//! (`client`) hands it raw session events, watch events and replies under
//! its op ids, and sends the requests it emits. The routing — op ids, the
//! watch table and its fan-out, the probe and the contact it feeds every
//! machine, the request window, the recipes' rules — is the core's; the
//! world only reads what it decides.
//!
//! Besides, for `no-herd`, the world keeps which server change woke which
//! machine: a machine whose watch the server set only after a change (a
//! shared session's older watch fired, and its event, overtaken by this
//! machine's read, reached every machine armed when it arrived) was not
//! woken by it. That is bookkeeping about the server, not routing: the
//! session alone decides who gets the event.

#[cfg(feature = "planted")]
use zkelect_core::Planted;
use zkelect_core::{
    Command, Input, MachineId, OpId, Reply, Request, Role, Sender, SessionEvent, WatchClass,
    WatchEvent, ZkCode,
};

use super::agent::Agent;
use super::engine::World;
use super::ev::Ev;
use super::proc::{agent, Member};
use super::text::{reply_text, short};
use super::told::Told;
use crate::invariant::Event;

/// The machines a watch event woke, and the server change that fired it:
/// their reads on waking are judged by `no-herd`.
#[derive(Debug, Default)]
pub(super) struct Woken {
    cause: u64,
    pids: Vec<usize>,
}

impl World {
    /// Plants `bug` in every session, now and later (before the run). Only
    /// with this crate's `planted` feature, which its own tests turn on:
    /// a build that links the simulator for its runs (the CLI) carries no
    /// planted code.
    #[cfg(feature = "planted")]
    pub fn plant(&mut self, bug: Planted) {
        self.planted = Some(bug);
        for p in &mut self.view.procs {
            if let Some(session) = p.session.as_mut() {
                session.plant(bug);
            }
        }
    }

    /// The process that is machine `id` of host `h`'s session.
    fn pid_of(&self, h: usize, id: MachineId) -> Option<usize> {
        self.view.procs[h].machines.iter().copied().find(
            |&pid| matches!(self.view.procs[pid].member, Member::Zkelect { id: m, .. } if m == id),
        )
    }

    /// Whether `h` hosts a core session.
    pub(super) fn hosts_session(&self, h: usize) -> bool {
        self.view.procs[h].session.is_some()
    }

    /// Feeds host `h`'s session one input from its client library, then
    /// drains it.
    fn feed(&mut self, h: usize, input: Input, woken: &Woken, text: impl FnOnce() -> String) {
        let now = self.view.now;
        if let Some(session) = self.view.procs[h].session.as_mut() {
            session.handle(now, input);
        }
        self.drain(h, woken, text);
    }

    /// The session's deadline: fires what is due.
    pub(super) fn session_timer(&mut self, h: usize) {
        let now = self.view.now;
        let p = &mut self.view.procs[h];
        let Some(session) = p.session.as_mut() else {
            return;
        };
        if session.poll_timeout().is_some_and(|t| t <= now) {
            p.timer_at = None;
            session.handle_timeout(now);
            self.drain(h, &Woken::default(), || "timer".into());
        }
    }

    /// A session event, from host `h`'s client library to its session.
    pub(super) fn session_event(&mut self, h: usize, event: SessionEvent) {
        if let Member::Foreign(model) = &mut self.view.procs[h].member {
            model.handle(self.view.now, Input::Session(event));
            return self.after_foreign(h, || format!("session {event:?}"));
        }
        if self.canary_of(h).is_some_and(|c| !c.sees(event)) {
            return;
        }
        if matches!(event, SessionEvent::Expired | SessionEvent::Closed) {
            // The server dropped every watch of the session.
            for i in 0..self.view.procs[h].machines.len() {
                let pid = self.view.procs[h].machines[i];
                self.view.procs[pid].armed_at.clear();
            }
        }
        let text = move || match event {
            SessionEvent::Connected { session_id, .. } => format!(
                "session Connected {}",
                session_id.map_or("(id not reported)".to_owned(), |s| s.to_string())
            ),
            other => format!("session {other:?}"),
        };
        self.feed(h, Input::Session(event), &Woken::default(), text);
    }

    /// A watch event, from host `h`'s client library to its session (a
    /// foreign model's to the model); `cause` names the server change.
    pub(super) fn watch_event(&mut self, h: usize, mut event: WatchEvent, cause: u64) {
        let text = self
            .trace
            .readable()
            .then(|| format!("watch {:?} {}", event.kind, short(&event.path)));
        if let Member::Foreign(model) = &mut self.view.procs[h].member {
            // Foreign models act on watches left from an earlier round
            // (Curator lists again on any `NodeDeleted`, kazoo on any
            // event), which is theirs to answer for: no herd of theirs.
            model.handle(self.view.now, Input::Watch(event));
            return self.after_foreign(h, || text.unwrap_or_default());
        }
        if let Some(canary) = self.canary_of(h) {
            let own = agent(&self.view.procs, h).node();
            if !canary.sees_watch(&event.path, own) {
                return;
            }
            event = canary.rewrite_watch(event, &self.view.canary_view(h, canary));
        }
        let woken = self.woken(h, &event, cause);
        self.feed(h, Input::Watch(event), &woken, || text.unwrap_or_default());
    }

    /// The machines of host `h` that `event` of server change `cause`
    /// reaches (the session's own table says which) and that it woke, for
    /// `no-herd`: not a machine whose watch the server set only after the
    /// change, nor one woken by its own node (not part of a herd), nor one
    /// whose node an operator deleted and which has not learned it yet (it
    /// is out of the queue, but the watch it set while it was in is still
    /// there), nor an observer (every one lists the queue on each change).
    /// The firing spends the watches set before the change.
    fn woken(&mut self, h: usize, event: &WatchEvent, cause: u64) -> Woken {
        let reaches = match self.view.procs[h].session.as_ref() {
            Some(session) => session.reaches(event),
            None => Vec::new(),
        };
        if reaches.len() > 1 {
            self.view.stats.shared_watches += 1;
        }
        let classes = WatchClass::fired_by(event.kind);
        let mut pids = Vec::new();
        for id in reaches {
            let Some(pid) = self.pid_of(h, id) else {
                continue;
            };
            let armed = &mut self.view.procs[pid].armed_at;
            let set_after = classes.iter().all(|class| {
                armed
                    .iter()
                    .any(|(p, c, since)| p == &event.path && c == class && *since >= cause)
            });
            armed.retain(|(p, c, since)| {
                !(p == &event.path && classes.contains(c) && *since < cause)
            });
            let own = agent(&self.view.procs, pid)
                .node()
                .is_some_and(|n| event.path.rsplit('/').next() == Some(n));
            let revoked = self.view.process(pid).revoked_at.is_some();
            if !set_after && !own && !revoked && !self.view.procs[pid].observer {
                pids.push(pid);
            }
        }
        Woken { cause, pids }
    }

    /// The server applied machine `pid`'s request arming `arms`: its watch
    /// is set as of now, after every change fired so far.
    pub(super) fn armed_applied(&mut self, pid: usize, arms: &(String, WatchClass)) {
        let now = self.cause;
        let armed = &mut self.view.procs[pid].armed_at;
        if !armed.iter().any(|(p, c, _)| *p == arms.0 && *c == arms.1) {
            armed.push((arms.0.clone(), arms.1, now));
        }
    }

    /// A reply reaches host `h`'s session (or foreign model), for `op` as
    /// it was sent: `request`, if the client had it.
    pub(super) fn deliver_reply(
        &mut self,
        h: usize,
        op: OpId,
        request: Option<&Request>,
        result: Result<Reply, ZkCode>,
    ) {
        let now = self.view.now;
        let text = self.trace.readable().then(|| match &result {
            Ok(r) => format!("reply {op} {}", reply_text(r)),
            Err(e) => format!("reply {op} err {e}"),
        });
        if let Member::Foreign(model) = &mut self.view.procs[h].member {
            let stale = !model.waits_for(op);
            // What the role would be at this moment without the reply.
            let role_before = if stale {
                let mut twin = model.clone();
                twin.handle_timeout(now);
                twin.role()
            } else {
                model.role()
            };
            model.handle(now, Input::Reply { op, result });
            let role_after = model.role();
            self.view.stats.stale_replies += u64::from(stale);
            self.observe(&Event::Answered {
                pid: h,
                op,
                stale,
                role_before,
                role_after,
            });
            return self.after_foreign(h, || text.unwrap_or_default());
        }
        let text = || text.unwrap_or_default();
        let sender = self.view.procs[h]
            .session
            .as_ref()
            .and_then(|s| s.sender(op));
        let Some(Sender::Machine { machine, op: own }) = sender else {
            // The session's probe, or an answer never asked for.
            return self.feed(h, Input::Reply { op, result }, &Woken::default(), text);
        };
        let Some(pid) = self.pid_of(h, machine) else {
            return self.feed(h, Input::Reply { op, result }, &Woken::default(), text);
        };
        let result = match (self.canary_of(pid), request) {
            (Some(canary), Some(request)) => {
                canary.rewrite(request, result, &self.view.canary_view(pid, canary))
            }
            _ => result,
        };
        let Some(before) = self.stale_and_role(h, pid, machine, own) else {
            // The machine has gone: the session drops the answer.
            return self.feed(h, Input::Reply { op, result }, &Woken::default(), text);
        };
        let (stale, role_before) = before;
        self.view.stats.stale_replies += u64::from(stale);
        if let Some(session) = self.view.procs[h].session.as_mut() {
            session.handle(now, Input::Reply { op, result });
        }
        let told = self.drain_events(h);
        let role_after = agent(&self.view.procs, pid).role();
        self.observe(&Event::Answered {
            pid,
            op: own,
            stale,
            role_before,
            role_after,
        });
        self.drain_rest(h, told, &Woken::default(), text);
    }

    /// Whether machine `id` of host `h`'s session (process `pid`) no
    /// longer waits for its op `own`, and the role it would have at this
    /// moment without the answer; `None` once it has left the session.
    fn stale_and_role(
        &self,
        h: usize,
        pid: usize,
        id: MachineId,
        own: OpId,
    ) -> Option<(bool, Role)> {
        let session = self.view.procs[h].session.as_ref()?;
        let machine = session.machine(id)?;
        let Some(candidate) = machine.as_candidate() else {
            // An observer keeps no role a late reply could change.
            let observer = machine.as_observer()?;
            return Some((observer.is_closed(), machine.role()));
        };
        if candidate.in_flight().any(|o| o == own) {
            return Some((false, candidate.role()));
        }
        // The twin is the whole session given only the time, not the
        // candidate alone: the session acts on its own deadlines at the
        // top of every input, the reply's too, and a close it gives up on
        // at this very moment (its close timeout) stops the machine
        // whichever input comes first. A candidate twin knew nothing of
        // that deadline and blamed the stop on the stale reply that
        // happened to arrive at the same millisecond.
        if let Member::Zkelect {
            exit: Some(exit), ..
        } = self.view.procs[pid].member
        {
            // Given up on already (detached): it closes out of sight, and
            // its driver knows it only as stopped.
            return Some((true, Agent::Stopped(exit).role()));
        }
        let mut twin = session.clone();
        twin.handle_timeout(self.view.now);
        let mut stopped = None;
        while let Some(event) = twin.poll_event() {
            if let zkelect_core::Event::Stopped { machine, exit, .. } = event {
                if machine == id {
                    stopped = Some(exit);
                }
            }
        }
        let role = match (stopped, twin.machine(id)) {
            (Some(exit), _) => Agent::Stopped(exit).role(),
            (None, Some(machine)) => machine.role(),
            (None, None) => Role::Closed,
        };
        Some((true, role))
    }

    /// Drains host `h`'s session after it took an input: its notices and
    /// stops, then its requests (each sent on the session's connection).
    pub(super) fn drain(&mut self, h: usize, woken: &Woken, text: impl FnOnce() -> String) {
        let told = self.drain_events(h);
        self.drain_rest(h, told, woken, text);
    }

    /// The session's events: each notice reaches its machine's application
    /// and the checkers; a machine that left is marked with how.
    fn drain_events(&mut self, h: usize) -> Told {
        let mut told = std::mem::take(&mut self.told);
        told.clear();
        while let Some(event) = self.view.procs[h]
            .session
            .as_mut()
            .and_then(|s| s.poll_event())
        {
            match event {
                zkelect_core::Event::Notice { machine, notice } => {
                    let Some(pid) = self.pid_of(h, machine) else {
                        continue;
                    };
                    self.on_notice(pid, &notice);
                    self.observe(&Event::Notice {
                        pid,
                        notice: &notice,
                    });
                    told.entry(pid).push(notice);
                }
                zkelect_core::Event::Updated(machine) => {
                    if let Some(pid) = self.pid_of(h, machine) {
                        told.entry(pid);
                    }
                }
                zkelect_core::Event::Stopped { machine, exit, .. } => {
                    let Some(pid) = self.pid_of(h, machine) else {
                        continue;
                    };
                    self.view.procs[pid].member = Member::Zkelect {
                        id: machine,
                        exit: Some(exit),
                    };
                    told.entry(pid);
                    told.stopped = true;
                }
                // The checkers judge each machine's own notices; the
                // session's connection state is a summary of the session
                // events the world sent it.
                zkelect_core::Event::Connection(_) => {}
                // A multi-lock's news reaches its application.
                zkelect_core::Event::Group { group, notice } => {
                    if let Some(g) = self.group_named(h, group) {
                        self.group_notice(g, notice);
                    }
                }
            }
        }
        told
    }

    /// The rest of a drain: the trace, the requests, closing the client
    /// once the session is done, the counts, the session's next deadline.
    fn drain_rest(&mut self, h: usize, told: Told, woken: &Woken, text: impl FnOnce() -> String) {
        let now = self.view.now;
        // Taken, not borrowed: `send` below needs the whole world.
        let mut commands = std::mem::take(&mut self.commands);
        let mut senders = std::mem::take(&mut self.senders);
        if let Some(session) = self.view.procs[h].session.as_mut() {
            while let Some(command) = session.poll_command() {
                senders.push(match session.sender(command.op) {
                    Some(Sender::Machine { machine, op }) => Some((machine, op)),
                    _ => None,
                });
                commands.push(command);
            }
        }
        if !told.updated.is_empty() {
            // Formatted only for a readable trace.
            let text = if self.trace.readable() {
                text()
            } else {
                String::new()
            };
            for (pid, notices) in &told.updated {
                let mut verbs = std::mem::take(&mut self.verbs);
                verbs.extend(
                    commands
                        .iter()
                        .zip(&senders)
                        .filter(|(_, f)| f.is_some_and(|(m, _)| self.pid_of(h, m) == Some(*pid)))
                        .map(|(c, _)| c.request.verb()),
                );
                let agent = agent(&self.view.procs, *pid);
                self.trace.step(
                    now,
                    *pid,
                    agent.role(),
                    agent.node(),
                    agent.watching().as_deref(),
                    &verbs,
                    || text.clone(),
                    notices,
                );
                verbs.clear();
                self.verbs = verbs;
            }
        }
        for (Command { op, request }, sender) in commands.drain(..).zip(senders.drain(..)) {
            let from = sender.and_then(|(machine, own)| Some((self.pid_of(h, machine)?, own)));
            if let Some((pid, own)) = from {
                self.observe(&Event::Emitted { pid, op: own });
            }
            let pid = from.map(|(pid, _)| pid);
            let cause = pid.filter(|p| woken.pids.contains(p)).map(|_| woken.cause);
            self.send(h, op, request, pid, cause);
        }
        self.commands = commands;
        self.senders = senders;
        self.close_if_done(h, told.stopped);
        for (pid, _) in &told.updated {
            self.drop_moot_request(*pid);
            self.view.recount_one(*pid);
        }
        self.told = told;
        let next = self.view.procs[h]
            .session
            .as_ref()
            .and_then(|s| s.poll_timeout());
        if next.is_some() && next != self.view.procs[h].timer_at {
            self.view.procs[h].timer_at = next;
            if let Some(at) = next {
                self.push(at, Ev::Timer { pid: h });
            }
        }
    }

    /// A request to let go of a node no longer held is moot.
    fn drop_moot_request(&mut self, pid: usize) {
        // Most machines were never asked: nothing to look up.
        let Some((asked, _)) = &self.view.procs[pid].asked else {
            return;
        };
        let a = agent(&self.view.procs, pid);
        if !a.role().is_leader() || a.node() != Some(asked.as_str()) {
            self.view.procs[pid].asked = None;
        }
    }

    /// The application closes host `h`'s client once its session is done:
    /// finished (closed, its machines done), or left without a machine
    /// (the last one `stopped` just now) — then the session is closed too.
    fn close_if_done(&mut self, h: usize, stopped: bool) {
        if self.view.procs[h].session_closed {
            return;
        }
        let now = self.view.now;
        let Some(session) = self.view.procs[h].session.as_mut() else {
            return;
        };
        if stopped && !session.is_closing() && session.machines().next().is_none() {
            session.close_session(now);
        }
        if session.is_finished() && !self.keeps_refused_client(h) {
            self.close_client(h);
        }
    }

    /// The canary of the application's close: it keeps host `h`'s client
    /// open though its session finished on refused credentials, or on a
    /// replay of them that ran out of time (with nothing sent after, the
    /// server keeps the session, and its nodes, until it expires).
    fn keeps_refused_client(&self, h: usize) -> bool {
        #[cfg(feature = "planted")]
        if self.keeps_refused_client {
            return self.view.on_refused_session(h);
        }
        let _ = h;
        false
    }

    /// Plants the canary of the application's close on refused
    /// credentials: a host whose session finished on `AuthFailed` keeps
    /// its client open (before the run). Only with the `planted` feature.
    #[cfg(feature = "planted")]
    pub fn plant_keeps_refused_client(&mut self) {
        self.keeps_refused_client = true;
    }

    /// Resigns or closes machine `pid` (an application's intent).
    pub(super) fn intent(&mut self, pid: usize, intent: Intent) {
        let now = self.view.now;
        let h = self.view.procs[pid].host;
        if let Member::Foreign(model) = &mut self.view.procs[pid].member {
            match intent {
                Intent::Resign { rejoin } => model.resign(now, rejoin),
                Intent::Close => model.close(now),
                // A foreign model has no read-write lock to downgrade.
                Intent::Downgrade => {}
            }
            return self.after_foreign(pid, || format!("{intent:?}"));
        }
        let Some(id) = self.view.procs[pid].machine_id() else {
            return;
        };
        let Some(session) = self.view.procs[h].session.as_mut() else {
            return;
        };
        // A machine that has stopped is gone: nothing to do.
        let _ = match intent {
            Intent::Resign { rejoin } => session.resign(now, id, rejoin),
            Intent::Close => session.close(now, id),
            Intent::Downgrade => session.downgrade(now, id).map(|_| ()),
        };
        self.drain(h, &Woken::default(), || format!("{intent:?}"));
    }

    /// The end of the run: every session closes (its machines first), and
    /// every foreign model.
    pub(super) fn close_all(&mut self) {
        let now = self.view.now;
        for pid in 0..self.view.procs.len() {
            if self.view.procs[self.view.procs[pid].host].crashed {
                continue;
            }
            if let Some(session) = self.view.procs[pid].session.as_mut() {
                session.close_session(now);
                self.drain(pid, &Woken::default(), || "close (end of run)".into());
            } else if matches!(self.view.procs[pid].member, Member::Foreign(_)) {
                self.intent(pid, Intent::Close);
            }
        }
    }
}

/// What an application asks of one machine.
#[derive(Debug, Clone, Copy)]
pub(super) enum Intent {
    /// It steps down (and queues again, with `rejoin`).
    Resign { rejoin: bool },
    /// It leaves for good.
    Close,
    /// A writer that holds goes on as a reader.
    Downgrade,
}
