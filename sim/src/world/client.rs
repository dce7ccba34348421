//! The client library each simulated process runs (see [`crate::client`] for
//! its rules): connecting and reconnecting, pings and the silence check,
//! declaring the connection lost, requests in flight and their answers, watch
//! events handed to the application, closing.

use std::rc::Rc;
use std::time::Duration;

use zkelect_core::startup::Learn;
use zkelect_core::{Input, OpId, Reply, Request, SessionEvent, Timestamp, WatchEvent, ZkCode};

use super::app::{reply_text, short};
use super::engine::World;
use super::ev::Ev;
use super::proc::{Conn, Inflight};
use super::routing::wire;
use super::spec::EVENT_LAG_MAX_MS;
use crate::canary::Canary;
use crate::client::{Clock, Library, Pace, Reconnected, Tick, TimeoutSource};
use crate::invariant::Event;
use crate::net::Way;

impl World {
    /// When a message sent now on `pid`'s link arrives: a base latency of
    /// 1–8 ms drawn here, then the network's rule (slow links, FIFO order).
    pub(super) fn arrival(&mut self, pid: usize, way: Way) -> Timestamp {
        let base = Duration::from_millis(self.rng.range(1, 8));
        self.net.arrival(pid, self.view.now, base, way)
    }

    /// When a message the server sends `pid` now arrives.
    pub(super) fn client_arrival(&mut self, pid: usize) -> Timestamp {
        self.arrival(pid, Way::ToClient)
    }

    /// When a message `pid` sends the server now arrives.
    pub(super) fn server_arrival(&mut self, pid: usize) -> Timestamp {
        self.arrival(pid, Way::ToServer)
    }

    /// A reply reaches the client: it answers the request in flight, if the
    /// connection it was sent on is still the current one.
    pub(super) fn reply_arrived(
        &mut self,
        pid: usize,
        gen: u64,
        op: OpId,
        result: Result<Reply, ZkCode>,
    ) {
        if self.view.procs[pid].gen != gen || !self.linked(pid) {
            return;
        }
        self.view.procs[pid].last_from_server = self.view.now;
        if let Some(sent) = self.view.procs[pid].inflight.remove(&op) {
            if let Some(entry) = &sent.arms {
                self.armed_answered(sent.pid, entry);
            }
            self.view.zk.arrived(pid, op);
            if self
                .canary_of(sent.pid)
                .is_some_and(|c| c.retries_at_once(&sent.request, &result))
            {
                return self.resend(pid, op, sent);
            }
            let result = match (self.chroot_of(pid), result) {
                (Some(root), Ok(Reply::Created { path, stat })) => Ok(Reply::Created {
                    path: unrooted(&path, root),
                    stat,
                }),
                (_, result) => result,
            };
            self.deliver_reply(sent.pid, sent.op, Some(&sent.request), result);
        }
    }

    /// Host `h`'s client sends a request again, as it went out the first
    /// time, under the same op (a canary's retry: [`Canary::retries_at_once`]).
    fn resend(&mut self, h: usize, op: OpId, mut sent: Inflight) {
        sent.arrived = false;
        let request = Rc::clone(&sent.request);
        self.view.procs[h].inflight.insert(op, sent);
        self.view.procs[h].last_to_server = self.view.now;
        let gen = self.view.procs[h].gen;
        let at = self.server_arrival(h);
        self.push(
            at,
            Ev::Request {
                pid: h,
                gen,
                op,
                request,
                cause: None,
            },
        );
    }

    /// The chroot of host `h`'s connect string, if it has one (only the
    /// swarm's bad ones: [`BadChroot`](crate::swarm::BadChroot)).
    pub(super) fn chroot_of(&self, h: usize) -> Option<&'static str> {
        let bad = self.view.swarm.env.chroot.as_ref()?;
        bad.hosts.binary_search(&h).is_ok().then(|| bad.root.path())
    }

    /// A watch event reaches the client, which hands it to the application in
    /// order; under `Fault::LagEvents` its event thread lags (replies do not
    /// wait for it), as zookeeper-async's watcher channel can.
    pub(super) fn watch_arrived(
        &mut self,
        pid: usize,
        gen: u64,
        mut event: WatchEvent,
        cause: u64,
    ) {
        if self.view.procs[pid].gen != gen || !self.linked(pid) {
            return;
        }
        if let Some(root) = self.chroot_of(pid) {
            event.path = unrooted(&event.path, root);
        }
        self.view.procs[pid].last_from_server = self.view.now;
        let lagging = self.view.procs[pid]
            .lag_until
            .is_some_and(|t| self.view.now < t);
        let lag = if lagging && self.rng.chance(0.5) {
            Duration::from_millis(self.rng.range(1, EVENT_LAG_MAX_MS))
        } else {
            Duration::ZERO
        };
        let at = (self.view.now + lag).max(self.view.procs[pid].event_tail);
        self.view.procs[pid].event_tail = at;
        if at > self.view.now {
            self.push(at, Ev::Event { pid, event, cause });
        } else {
            self.watch_event(pid, event, cause);
        }
    }

    /// The session gets a watch event from its client library, and hands it
    /// to every machine armed on it (`hosting`).
    pub(super) fn watch_event(&mut self, h: usize, event: WatchEvent, cause: u64) {
        for (pid, woken) in self.route_watch(h, &event, cause) {
            if self.hears(pid, &event) {
                self.machine_watch(pid, event.clone(), cause, woken);
            }
        }
    }

    /// One machine gets a watch event.
    fn machine_watch(&mut self, pid: usize, event: WatchEvent, cause: u64, woken: bool) {
        let text = self
            .trace
            .readable()
            .then(|| format!("watch {:?} {}", event.kind, short(&event.path)));
        // A candidate's own-node watch is not part of a herd; nor is a
        // candidate whose node an operator deleted and which has not learned it
        // yet: it is out of the queue, but the watch it set while it was in is
        // still there. Nor are foreign models: both recipes act on watches
        // left from an earlier round (Curator lists again on any `NodeDeleted`,
        // kazoo on any event), which is theirs to answer for.
        let own = self.view.procs[pid]
            .c
            .node()
            .is_some_and(|n| event.path.rsplit('/').next() == Some(n));
        let revoked = self.process(pid).revoked_at.is_some();
        // Nor are observers: every one of them lists the queue on each change.
        let foreign = self.view.procs[pid].c.foreign().is_some()
            || self.view.procs[pid].c.observer().is_some();
        // Nor is a machine whose watch the server set after the change: a
        // shared session's older watch fired, and its event, overtaken by
        // this machine's read, reached every machine armed when it arrived
        // (lag seeds 37589, 54755: the machine's read had shown the change).
        let cause = (woken && !own && !revoked && !foreign).then_some(cause);
        let mut event = event;
        if let Some(canary) = self.canary_of(pid) {
            if !canary.sees_watch(&event.path, self.view.procs[pid].c.node()) {
                return;
            }
            event = canary.rewrite_watch(event, &self.canary_view(pid, canary));
        }
        self.view.procs[pid]
            .c
            .handle(self.view.now, Input::Watch(event));
        self.after(pid, cause, || text.unwrap_or_default());
    }

    /// The client library this process runs.
    pub(super) fn library(&self, pid: usize) -> Library {
        if self.view.procs[pid].c.foreign().is_some() {
            Library::Java
        } else {
            Library::for_candidate(self.view.knobs.session_ids)
        }
    }

    /// What `library`'s timer does now ([`Library::tick`]), by the timing of
    /// the clock's timeout, worked out once per timeout.
    fn library_tick(&mut self, library: Library, clock: &Clock) -> Tick {
        let pace = match self.pace {
            Some(pace) if pace.timeout() == clock.timeout => pace,
            _ => {
                let pace = Pace::new(clock.timeout);
                self.pace = Some(pace);
                pace
            }
        };
        let tick = library.tick_paced(self.view.now, clock, &pace);
        debug_assert_eq!(
            tick,
            library.tick(self.view.now, clock),
            "the paced tick differs"
        );
        tick
    }

    /// Sets the client library's timer to `at` unless it is set earlier.
    fn schedule_tick(&mut self, pid: usize, at: Timestamp) {
        let p = &mut self.view.procs[pid];
        if p.tick_at.is_some_and(|t| t <= at) {
            return;
        }
        p.tick_at = Some(at);
        let gen = p.gen;
        self.push(at, Ev::ClientTick { pid, gen, at });
    }

    /// The client library's timer: its silence check and pings, by
    /// [`Library::tick`].
    pub(super) fn client_tick(&mut self, pid: usize, gen: u64, at: Timestamp) {
        let p = &self.view.procs[pid];
        if p.conn != Conn::Connected || p.gen != gen || p.tick_at != Some(at) {
            return;
        }
        let clock = Clock {
            connected_at: p.connected_at,
            last_recv: p.last_from_server,
            last_sent: p.last_to_server,
            ping_out: p.ping_out,
            idle: p.inflight.is_empty(),
            timeout: p.timeout,
        };
        let library = self.library(pid);
        self.view.procs[pid].tick_at = None;
        match self.library_tick(library, &clock) {
            Tick::Lost => self.disconnect(
                pid,
                match library {
                    Library::ZookeeperClient => {
                        "zookeeper-client: nothing received for 2/5 of the session timeout"
                    }
                    _ => "no answer from the server for 2/3 of the session timeout",
                },
            ),
            Tick::Go { ping, next } => {
                if ping {
                    let p = &mut self.view.procs[pid];
                    p.ping_out = true;
                    p.last_to_server = self.view.now;
                    let at = self.server_arrival(pid);
                    self.push(at, Ev::Ping { pid, gen });
                }
                self.schedule_tick(pid, next);
            }
        }
    }

    /// The server's answer to a ping arrives: bytes received, and the next
    /// ping may fall due earlier than the timer's next moment.
    pub(super) fn pong(&mut self, pid: usize, gen: u64) {
        if self.view.procs[pid].gen != gen || !self.linked(pid) {
            return;
        }
        let p = &mut self.view.procs[pid];
        p.last_from_server = self.view.now;
        p.ping_out = false;
        let clock = Clock {
            connected_at: p.connected_at,
            last_recv: p.last_from_server,
            last_sent: p.last_to_server,
            ping_out: false,
            idle: p.inflight.is_empty(),
            timeout: p.timeout,
        };
        if let Tick::Go { next, .. } = self.library_tick(self.library(pid), &clock) {
            self.schedule_tick(pid, next);
        }
    }

    /// The Java client's and kazoo's read timeout: the connection is lost
    /// exactly two thirds of the session timeout after the last message from
    /// the server (besides the check at each ping by
    /// [`client_tick`](Self::client_tick)).
    pub(super) fn read_timeout(&mut self, pid: usize, gen: u64) {
        let p = &self.view.procs[pid];
        if p.gen != gen || p.conn != Conn::Connected {
            return;
        }
        let due = p.last_from_server + p.timeout * 2 / 3;
        if self.view.now >= due {
            self.disconnect(
                pid,
                "read timeout: nothing from the server for 2/3 of the session timeout",
            );
        } else {
            self.push(due, Ev::ReadTimeout { pid, gen });
        }
    }

    /// The client library declares the connection lost: `Disconnected`, every
    /// request in flight fails with `ConnectionLoss`, a reconnect is scheduled.
    pub(super) fn disconnect(&mut self, pid: usize, why: &str) {
        if self.view.procs[pid].conn != Conn::Connected {
            return;
        }
        self.trace.note(self.view.now, Some(pid), 'd', || {
            format!("disconnected: {why}")
        });
        let p = &mut self.view.procs[pid];
        p.conn = Conn::Disconnected;
        p.gen += 1;
        let failed = std::mem::take(&mut p.inflight);
        self.session_event(pid, SessionEvent::Disconnected);
        for sent in failed.into_values() {
            if let Some(entry) = &sent.arms {
                self.armed_answered(sent.pid, entry);
            }
            self.deliver_reply(
                sent.pid,
                sent.op,
                Some(&sent.request),
                Err(ZkCode::ConnectionLoss),
            );
        }
        let at = self.view.now + Duration::from_millis(self.rng.range(100, 400));
        self.push(at, Ev::Reconnect { pid });
    }

    /// The canary, for a zkelect candidate (foreign models and observers are
    /// never canaries).
    pub(super) fn canary_of(&self, pid: usize) -> Option<Canary> {
        self.canary
            .filter(|_| self.view.procs[pid].c.candidate().is_some())
    }

    /// A session event, to every machine on host `h`'s session.
    pub(super) fn session_event(&mut self, h: usize, event: SessionEvent) {
        if matches!(event, SessionEvent::Expired | SessionEvent::Closed) {
            self.watches_dropped(h);
        }
        for pid in self.machines(h) {
            self.machine_session_event(pid, event);
        }
    }

    pub(super) fn reconnect(&mut self, pid: usize) {
        let p = &self.view.procs[pid];
        if p.conn == Conn::Connected || p.session_closed {
            return;
        }
        if !self.reachable(pid) {
            let at = self.view.now + Duration::from_millis(self.rng.range(200, 500));
            self.push(at, Ev::Reconnect { pid });
            return;
        }
        let identity = self.identity(Some(pid));
        let requested = self.view.swarm.session_timeout;
        // zookeeper-async (which does not report session ids either) learns
        // the timeout by a handshake of its own before its first session.
        let source = if self.view.knobs.session_ids {
            TimeoutSource::Session
        } else {
            TimeoutSource::Handshake
        };
        if self.view.procs[pid].started.is_none() && self.view.swarm.env.ensemble.is_some() {
            // The transports' start-up (the core's machine): which members
            // the client gets, the bound zookeeper-async reports, and when
            // the client connects.
            let learn = match source {
                TimeoutSource::Handshake => Learn::SessionTimeout,
                TimeoutSource::Session => Learn::Liveness,
            };
            match crate::startup::start_up(
                &mut self.view.zk,
                self.view.now,
                requested,
                learn,
                |c| c,
            ) {
                Ok(started) => {
                    let negotiated = self.view.zk.negotiate(requested);
                    if let Err(e) = crate::startup::check(&started, self.view.now, negotiated) {
                        self.view.zk.startup_violation(format!("p{pid}: {e}"));
                    }
                    self.view.zk.set_plan(pid, &started.plan.servers);
                    if source == TimeoutSource::Handshake {
                        self.view.procs[pid].handshaken = started.plan.bound;
                    }
                    self.view.procs[pid].started = Some(started.at);
                    if started.at > self.view.now {
                        self.push(started.at, Ev::Reconnect { pid });
                        return;
                    }
                }
                Err(_) => {
                    // No member answered: the process tries again later.
                    let at = self.view.now + Duration::from_millis(self.rng.range(200, 500));
                    self.push(at, Ev::Reconnect { pid });
                    return;
                }
            }
        } else if self.view.procs[pid]
            .started
            .is_some_and(|at| at > self.view.now)
        {
            // Its start-up is still deciding.
            return;
        }
        if source == TimeoutSource::Handshake && self.view.procs[pid].handshaken.is_none() {
            let learned = self
                .view
                .zk
                .handshake(self.view.now, requested, identity.as_deref());
            self.view.procs[pid].handshaken = Some(learned);
        }
        // The Java client and zookeeper-client re-send their watches
        // (`setWatches`); zookeeper-async does not.
        let rearm = self.library(pid) != Library::ZookeeperAsync;
        let forget = self.canary_of(pid) == Some(Canary::TrustsBehind);
        let connected = self.view.zk.connect(
            pid,
            self.view.now,
            self.view.procs[pid].session,
            requested,
            identity.as_deref(),
            forget,
            rearm,
        );
        let Ok(connected) = connected else {
            // Every member refused (behind the client, or cut off): try again.
            let at = self.view.now + Duration::from_millis(self.rng.range(200, 500));
            self.push(at, Ev::Reconnect { pid });
            return;
        };
        match connected {
            Reconnected::Same(_) => {}
            Reconnected::Expired { new, timeout } => {
                // The server expired it while we were away: say so, then start afresh.
                self.view.procs[pid].session = None;
                self.session_event(pid, SessionEvent::Expired);
                self.view.procs[pid].session = Some(new);
                self.view.procs[pid].timeout = timeout;
            }
            Reconnected::New { session, timeout } => {
                self.view.procs[pid].session = Some(session);
                self.view.procs[pid].timeout = timeout;
            }
        }
        let p = &mut self.view.procs[pid];
        p.conn = Conn::Connected;
        p.gen += 1;
        p.last_from_server = self.view.now;
        p.last_to_server = self.view.now;
        p.connected_at = self.view.now;
        p.ping_out = false;
        p.tick_at = None;
        let (session_id, timeout, gen) = (p.session, p.timeout, p.gen);
        // The client library's own timing follows the session's timeout; what
        // it reports is what it learned.
        let first = match self.library(pid) {
            Library::Java => self.view.now + timeout / 3,
            Library::ZookeeperClient => self.view.now + timeout / 20,
            Library::ZookeeperAsync => self.view.now + timeout * 2 / 3,
        };
        self.schedule_tick(pid, first);
        if self.view.procs[pid].c.foreign().is_some() {
            self.push(
                self.view.now + timeout * 2 / 3,
                Ev::ReadTimeout { pid, gen },
            );
        }
        let session_id = session_id.filter(|_| self.view.knobs.session_ids);
        let learned = match source {
            TimeoutSource::Session => timeout,
            TimeoutSource::Handshake => self.view.procs[pid].handshaken.unwrap_or(timeout),
        };
        let reported = self
            .canary_of(pid)
            .map_or(learned, |c| c.reported_timeout(learned, requested));
        self.session_event(
            pid,
            SessionEvent::Connected {
                session_id,
                timeout: reported,
            },
        );
        // Re-armed watches whose node changed after what the client had seen.
        let fired = self.view.zk.take_fired();
        self.send_fired(fired);
    }

    pub(super) fn deliver_reply(
        &mut self,
        pid: usize,
        op: OpId,
        request: Option<&Request>,
        result: Result<Reply, ZkCode>,
    ) {
        let result = match (self.canary_of(pid), request) {
            (Some(canary), Some(request)) => {
                canary.rewrite(request, result, &self.canary_view(pid, canary))
            }
            _ => result,
        };
        let text = self.trace.readable().then(|| match &result {
            Ok(r) => format!("reply {op} {}", reply_text(r)),
            Err(e) => format!("reply {op} err {e}"),
        });
        let c = &self.view.procs[pid].c;
        let stale = !c.waits_for(op);
        // What the role would be at this moment without the reply.
        let role_before = if stale {
            self.view.stats.stale_replies += 1;
            let mut twin = c.clone();
            twin.handle_timeout(self.view.now);
            twin.role()
        } else {
            c.role()
        };
        self.view.procs[pid]
            .c
            .handle(self.view.now, Input::Reply { op, result });
        let role_after = self.view.procs[pid].c.role();
        self.observe(&Event::Answered {
            pid,
            op,
            stale,
            role_before,
            role_after,
        });
        self.after(pid, None, || text.unwrap_or_default());
    }

    /// The application closed the candidate and then its client: the session
    /// ends on the server (its ephemerals go), and requests still in flight are
    /// answered with `ConnectionLoss` by the client library.
    pub(super) fn close_client(&mut self, pid: usize) {
        let p = &mut self.view.procs[pid];
        p.session_closed = true;
        p.conn = Conn::Disconnected;
        p.gen += 1;
        let pending: Vec<(usize, OpId)> = std::mem::take(&mut p.inflight)
            .into_values()
            .map(|sent| (sent.pid, sent.op))
            .collect();
        if let Some(s) = p.session.take() {
            if self.server_up() {
                let fired = self.view.zk.close_session(s);
                self.send_fired(fired);
            }
            // With the server down, the session expires on its own later.
        }
        self.view.recount(pid);
        for (pid, op) in pending {
            self.push(self.view.now, Ev::LocalFail { pid, op });
        }
    }

    pub(super) fn send(&mut self, pid: usize, op: OpId, request: Request, cause: Option<u64>) {
        let request = match self.canary_of(pid) {
            Some(canary) => canary.rewrite_request(request, &self.canary_view(pid, canary)),
            None => request,
        };
        let request = match self.planted {
            Some(_) => self.planted_request(pid, request),
            None => request,
        };
        if self
            .canary_of(pid)
            .is_some_and(|c| c.answers_locally(&request))
        {
            let result = Box::new(Ok(Reply::Exists(None)));
            return self.push(self.view.now, Ev::LocalReply { pid, op, result });
        }
        let h = self.view.procs[pid].host;
        if self.view.procs[h].conn != Conn::Connected || self.view.procs[h].session_closed {
            // A client that is not connected fails the request at once (as an event,
            // so a candidate that retries at once cannot recurse without end).
            return self.push(self.view.now, Ev::LocalFail { pid, op });
        }
        let arms = self.arm(pid, &request);
        // The client library puts its connect string's chroot in front of
        // every path (and takes it off every path it hands back).
        let request = match self.chroot_of(h) {
            Some(root) => rooted(request, root),
            None => request,
        };
        let gen = self.view.procs[h].gen;
        self.view.procs[h].last_to_server = self.view.now;
        let on_wire = wire(h, pid, op);
        let request = Rc::new(request);
        self.view.procs[h].inflight.insert(
            on_wire,
            Inflight {
                request: Rc::clone(&request),
                arrived: false,
                pid,
                op,
                arms,
            },
        );
        let at = self.server_arrival(h);
        self.push(
            at,
            Ev::Request {
                pid: h,
                gen,
                op: on_wire,
                request,
                cause,
            },
        );
    }
}

/// `request` with `root` in front of its path, as a client library whose
/// connect string has that chroot sends it (`/` is the chroot itself).
fn rooted(request: Request, root: &str) -> Request {
    let on = |path: String| {
        if path == "/" {
            root.to_owned()
        } else {
            format!("{root}{path}")
        }
    };
    match request {
        Request::Create {
            path,
            data,
            mode,
            acl,
        } => Request::Create {
            path: on(path),
            data,
            mode,
            acl,
        },
        Request::GetChildren { path, watch } => Request::GetChildren {
            path: on(path),
            watch,
        },
        Request::GetData { path, watch } => Request::GetData {
            path: on(path),
            watch,
        },
        Request::Exists { path, watch } => Request::Exists {
            path: on(path),
            watch,
        },
        Request::Delete { path, version } => Request::Delete {
            path: on(path),
            version,
        },
        Request::SetData {
            path,
            data,
            version,
        } => Request::SetData {
            path: on(path),
            data,
            version,
        },
        Request::Sync { path } => Request::Sync { path: on(path) },
    }
}

/// A path the server gives back, without the chroot `root` (the client
/// library's view; `root` itself is `/`).
fn unrooted(path: &str, root: &str) -> String {
    match path.strip_prefix(root) {
        Some("") => "/".to_owned(),
        Some(rest) if rest.starts_with('/') => rest.to_owned(),
        _ => path.to_owned(),
    }
}
