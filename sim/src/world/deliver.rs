//! Delivering one event: to the server model, a client library, a
//! machine, or the world itself; and the watch events a server change fires.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use zkelect_core::{OpId, Request, WatchKind, ZkCode};

use crate::invariant::Event;
use crate::net::{Arrival, Way};
use crate::zk::Fired;

use super::engine::World;
use super::ev::Ev;
use super::hosting::Intent;
use super::proc::{agent, Conn, Member};
use super::spec::{Phase, SETTLE};

impl World {
    pub(super) fn deliver(&mut self, ev: Ev) {
        let (ev, arrival) = match ev {
            Ev::Held(ev) => (*ev, Arrival::Held),
            ev => (ev, Arrival::Fresh),
        };
        // A paused process handles nothing: its events wait for it, in order
        // (messages on its link through the link's verdict, which keeps them
        // FIFO with those a partition holds).
        let paused_until = match ev.handler() {
            Some(pid) => {
                let h = self.view.procs[pid].host;
                if self.view.procs[h].crashed {
                    if let (Some((link, way)), Arrival::Held) = (ev.crossing(), arrival) {
                        self.net.drop_held(link, way);
                    }
                    return;
                }
                self.view.procs[h]
                    .paused_until
                    .filter(|&t| self.view.now < t)
            }
            None => None,
        };
        if let Some((link, way)) = ev.crossing() {
            if let Some(at) = self
                .net
                .verdict(link, self.view.now, way, arrival, paused_until)
            {
                self.push(at, Ev::Held(Box::new(ev)));
                return;
            }
        } else if let Some(until) = paused_until {
            self.push(until, ev);
            return;
        }
        match ev {
            Ev::Request {
                pid,
                gen,
                op,
                request,
                cause,
            } => self.on_request(pid, gen, op, request, cause),
            Ev::Reply {
                pid,
                gen,
                op,
                result,
            } => self.reply_arrived(pid, gen, op, *result),
            Ev::Watch {
                pid,
                gen,
                event,
                cause,
            } => self.watch_arrived(pid, gen, event, cause),
            Ev::Event { pid, event, cause } => self.watch_event(pid, event, cause),
            Ev::Ping { pid, gen } => {
                if self.view.procs[pid].gen == gen && self.linked(pid) {
                    if let Some(s) = self.view.procs[pid].session_id {
                        self.view.zk.touch(self.view.now, s);
                    }
                    let at = self.client_arrival(pid);
                    self.push(at, Ev::Pong { pid, gen });
                }
            }
            Ev::Pong { pid, gen } => self.pong(pid, gen),
            Ev::AddAuth { pid, gen, attempt } => self.add_auth_arrived(pid, gen, attempt),
            Ev::AuthAnswer { pid, gen, attempt } => self.auth_answered(pid, gen, attempt),
            Ev::ReplayWake { pid, gen } => self.replay_wake(pid, gen),
            Ev::AskAnswer { pid, answer } => self.ask_answered(pid, *answer),
            Ev::AskWake { pid } => self.ask_wake(pid),
            Ev::ClientTick { pid, gen, at } => self.client_tick(pid, gen, at),
            Ev::ReadTimeout { pid, gen } => self.read_timeout(pid, gen),
            Ev::Reconnect { pid } => self.reconnect(pid),
            Ev::Timer { pid } => {
                if self.hosts_session(pid) {
                    return self.session_timer(pid);
                }
                let now = self.view.now;
                let p = &mut self.view.procs[pid];
                if let Member::Foreign(model) = &mut p.member {
                    if model.poll_timeout().is_some_and(|t| t <= now) {
                        p.timer_at = None;
                        model.handle_timeout(now);
                        self.after_foreign(pid, || "timer".into());
                    }
                }
            }
            Ev::Expiry => self.expire(),
            Ev::Fault(fault) => self.inject(fault),
            Ev::ServerUp => {
                self.server_down_until = None;
                self.view.zk.restart(self.view.now);
                self.trace
                    .note(self.view.now, None, 'S', || "server up".into());
            }
            Ev::Closed { pid, gen } => {
                if self.view.procs[pid].gen == gen {
                    self.disconnect(pid, "the server closed the connection");
                }
            }
            Ev::LocalFail { pid, op } => {
                self.deliver_reply(pid, op, None, Err(ZkCode::ConnectionLoss));
            }
            Ev::LocalReply { pid, op, result } => self.deliver_reply(pid, op, None, *result),
            Ev::Resume { pid } => {
                // Overlapping pauses end with the last one.
                if self.view.procs[pid]
                    .paused_until
                    .is_some_and(|t| t <= self.view.now)
                {
                    self.view.procs[pid].paused_until = None;
                    self.view.procs[pid].resumed_at = self.view.now;
                    self.trace
                        .note(self.view.now, Some(pid), 'r', || "resumed".into());
                }
            }
            Ev::AppWrite { pid } => self.app_write(pid),
            Ev::AclChange { pid } => self.change_acl(pid),
            Ev::Honour { pid } => {
                // It honours the revocation request: it resigns (and
                // queues again); a multi-lock's part releases the whole.
                let host = self.view.procs[pid].host;
                if !self.view.procs[host].crashed && agent(&self.view.procs, pid).role().is_leader()
                {
                    match self.group_of(pid) {
                        Some(g) => self.group_release(g),
                        None => self.intent(pid, Intent::Resign { rejoin: true }),
                    }
                }
            }
            Ev::AddMultiLocks => {
                for draw in self.view.swarm.env.hosting.multi_locks.clone() {
                    self.spawn_multi_lock(&draw);
                }
            }
            Ev::GroupStart { g } => self.group_start(g),
            Ev::GroupRelease { g } => self.group_release(g),
            Ev::Write { pid, token } => self.resource_write(pid, token),
            Ev::Heal => {
                self.view.phase = Phase::Healed;
                self.trace
                    .note(self.view.now, None, 'H', || "faults stop".into());
            }
            Ev::LivenessDue => {
                self.view.phase = Phase::Settled;
                if self.view.procs.iter().any(|p| p.observer) {
                    self.push(self.view.now + SETTLE, Ev::Quiet);
                }
                self.trace
                    .note(self.view.now, None, 'L', || "liveness bound reached".into());
                self.observe(&Event::LivenessDue);
                self.push(self.view.now + SETTLE, Ev::CloseAll);
            }
            Ev::Quiet => {
                self.view.stats.observer_checks += self
                    .processes()
                    .filter(|p| p.observer && !p.crashed)
                    .count() as u64;
                self.observe(&Event::Quiet);
            }
            Ev::CloseAll => {
                self.view.phase = Phase::Closing;
                self.close_all();
                let t = self.negotiated();
                self.push(self.view.now + t * 2 + Duration::from_secs(3), Ev::End);
            }
            Ev::End => {
                self.observe(&Event::End);
                self.done = true;
            }
            // Unwrapped above; a message is never wrapped twice.
            Ev::Held(ev) => self.deliver(Ev::Held(ev)),
        }
    }

    pub(super) fn expire(&mut self) {
        if let (Some(keeper), true) = (self.keeper, self.server_up()) {
            self.view.zk.keep_alive(self.view.now, keeper);
        }
        if self.server_up() {
            let (expired, fired) = self.view.zk.expire_due(self.view.now);
            for s in expired {
                self.trace.note(self.view.now, None, 'x', || {
                    format!("server expired session {s}")
                });
                // The server closes an expired session's connection.
                if let Some(pid) = self.view.procs.iter().position(|p| p.session_id == Some(s)) {
                    self.view.recount(pid);
                    self.tell(format!(
                        "the server expires p{pid}'s session; its node goes with it"
                    ));
                    if self.view.procs[pid].conn == Conn::Connected {
                        let gen = self.view.procs[pid].gen;
                        let at = self.client_arrival(pid);
                        self.push(at, Ev::Closed { pid, gen });
                    }
                }
            }
            self.send_fired(fired);
            self.ensemble_tick();
        }
        self.push(self.view.now + Duration::from_millis(200), Ev::Expiry);
    }

    /// The ensemble's member faults (see [`Server::tick`]): a member that
    /// drops its clients closes their connections.
    pub(super) fn ensemble_tick(&mut self) {
        let (dropped, fired, notes) = self.view.zk.tick(self.view.now);
        for note in notes {
            self.trace.note(self.view.now, None, 'Z', || note.clone());
            self.tell(note);
        }
        for s in dropped {
            if let Some(pid) = self.view.procs.iter().position(|p| p.session_id == Some(s)) {
                if self.view.procs[pid].conn == Conn::Connected {
                    let gen = self.view.procs[pid].gen;
                    let at = self.client_arrival(pid);
                    self.push(at, Ev::Closed { pid, gen });
                }
            }
        }
        self.send_fired(fired);
    }

    pub(super) fn on_request(
        &mut self,
        pid: usize,
        gen: u64,
        op: OpId,
        request: Rc<Request>,
        cause: Option<u64>,
    ) {
        if self.view.procs[pid].gen != gen || !self.linked(pid) {
            return;
        }
        let Some(session) = self.view.procs[pid].session_id else {
            return;
        };
        // The session's own probe counts as its host's.
        let mut from = pid;
        let mut arms = None;
        if let Some(entry) = self.view.procs[pid].on_wire.get_mut(&op) {
            entry.arrived = true;
            from = entry.from.unwrap_or(pid);
            // Lent, not copied: it goes back to the entry below.
            arms = entry.arms.take();
        }
        if let Some(entry) = &arms {
            self.armed_applied(from, entry);
            if let Some(wire) = self.view.procs[pid].on_wire.get_mut(&op) {
                wire.arms = arms;
            }
        }
        self.observe(&Event::Request {
            host: pid,
            pid: from,
        });
        if let Some(cause) = cause {
            let pid = from;
            if matches!(
                *request,
                Request::GetChildren { .. } | Request::GetData { .. }
            ) {
                let allowed = self.herd.get(&cause).copied().unwrap_or(1);
                self.observe(&Event::Woken {
                    pid,
                    cause,
                    allowed,
                });
            }
        }
        let (result, fired) = self.view.zk.apply(self.view.now, session, &request);
        self.view.zk.answered(pid, op);
        self.send_fired(fired);
        // With reorder, a reply may overtake watch events already on their way.
        let overtake = self.view.swarm.reorder && self.rng.chance(0.2);
        let at = self.arrival(pid, Way::Reply { overtake });
        self.push(
            at,
            Ev::Reply {
                pid,
                gen,
                op,
                result: Box::new(result),
            },
        );
    }

    /// Sends fired watches to their clients. Each deleted node is a server
    /// change of its own (an expiry deletes several at once); the other events
    /// of one request share one.
    pub(super) fn send_fired(&mut self, fired: Vec<Fired>) {
        if fired.is_empty() {
            return;
        }
        self.cause += 1;
        let shared = self.cause;
        let mut per_path: BTreeMap<String, u64> = BTreeMap::new();
        // A lagging ensemble member applies several changes at once: each
        // change (its zxid) is a cause of its own.
        let mut per_change: BTreeMap<i64, u64> = BTreeMap::new();
        for f in fired {
            let cause = if f.event.kind == WatchKind::NodeDeleted {
                let next = self.cause + 1;
                let c = *per_path.entry(f.event.path.clone()).or_insert(next);
                self.cause = self.cause.max(c);
                c
            } else if per_change.is_empty() {
                per_change.insert(f.zxid, shared);
                shared
            } else {
                let next = self.cause + 1;
                let c = *per_change.entry(f.zxid).or_insert(next);
                self.cause = self.cause.max(c);
                c
            };
            if !self.herd.contains_key(&cause) {
                let bound = self.herd_bound(&f.event);
                self.herd.insert(cause, bound);
            }
            let Some(pid) = self
                .view
                .procs
                .iter()
                .position(|p| p.session_id == Some(f.session))
            else {
                continue;
            };
            if self.view.procs[pid].conn != Conn::Connected {
                continue;
            }
            let gen = self.view.procs[pid].gen;
            let at = self.client_arrival(pid);
            self.push(
                at,
                Ev::Watch {
                    pid,
                    gen,
                    event: f.event,
                    cause,
                },
            );
        }
    }
}
