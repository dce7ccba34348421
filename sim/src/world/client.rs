//! The client library each simulated process runs (see [`crate::client`] for
//! its rules): connecting and reconnecting, pings and the silence check,
//! declaring the connection lost, requests in flight and their answers, watch
//! events handed to the application, closing.

use std::rc::Rc;
use std::time::Duration;

use zkelect_core::startup::Learn;
use zkelect_core::{OpId, Reply, Request, SessionEvent, Timestamp, WatchClass, WatchEvent, ZkCode};

use super::engine::World;
use super::ev::Ev;
use super::proc::{Conn, Member, OnWire};
use super::spec::EVENT_LAG_MAX_MS;
use crate::canary::Canary;
use crate::client::{Clock, Library, Pace, Reconnected, Tick, TimeoutSource};
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
        if let Some(sent) = self.view.procs[pid].on_wire.remove(&op) {
            self.view.zk.arrived(pid, op);
            if sent
                .from
                .and_then(|from| self.canary_of(from))
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
            self.deliver_reply(pid, op, Some(&sent.request), result);
        }
    }

    /// Host `h`'s client sends a request again, as it went out the first
    /// time, under the same op (a canary's retry: [`Canary::retries_at_once`]).
    fn resend(&mut self, h: usize, op: OpId, mut sent: OnWire) {
        sent.arrived = false;
        let request = Rc::clone(&sent.request);
        self.view.procs[h].on_wire.insert(op, sent);
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

    /// The client library this process runs.
    pub(super) fn library(&self, pid: usize) -> Library {
        if matches!(self.view.procs[pid].member, Member::Foreign(_)) {
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
            idle: p.on_wire.is_empty(),
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
            idle: p.on_wire.is_empty(),
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
        let failed = std::mem::take(&mut p.on_wire);
        // A replay under way, or a bound not yet confirmed, had not reported
        // `Connected`: the core still holds `Disconnected`, and the
        // transport says nothing again.
        let held = self.asker_dropped(pid);
        if !self.end_replay(pid) && !held {
            self.session_event(pid, SessionEvent::Disconnected);
        }
        for (op, sent) in failed.into_entries() {
            self.deliver_reply(pid, op, Some(&sent.request), Err(ZkCode::ConnectionLoss));
        }
        let at = self.view.now + Duration::from_millis(self.rng.range(100, 400));
        self.push(at, Ev::Reconnect { pid });
    }

    /// The canary, for a zkelect candidate (foreign models and observers are
    /// never canaries; a canary's world runs each candidate on a session of
    /// its own, so its session's host is the candidate).
    pub(super) fn canary_of(&self, pid: usize) -> Option<Canary> {
        self.canary
            .filter(|_| self.view.procs[pid].config.is_some())
    }

    /// Whether the server refuses host `h`'s credentials at this reconnect
    /// to its live session: the swarm's [`Refusal`](crate::swarm::Refusal)
    /// names `h` and this reconnect (counted here), and `h` has some.
    fn refused_now(&mut self, h: usize) -> bool {
        let Some(r) = self.view.swarm.env.refusal else {
            return false;
        };
        if r.host != h || self.view.refused.is_some() || self.identity(Some(h)).is_none() {
            return false;
        }
        self.same_reconnects += 1;
        self.same_reconnects == r.nth
    }

    /// The server refuses host `h`'s credentials on the connection just
    /// made to its session (a digest provider gone, a password changed): it
    /// closes the connection, so the watches it re-armed go and fire
    /// nothing, while the session lives on until it is closed or expires.
    /// The client reports `AuthFailed` and stops there, never connecting
    /// again, as both real clients do; what the session and the application
    /// do next is theirs (the core's session ends, its host closes the
    /// client, [`close_if_done`](Self::close_if_done)).
    fn refuse(&mut self, h: usize) {
        let _ = self.view.zk.take_fired();
        let Some(session) = self.view.procs[h].session_id else {
            return;
        };
        self.view.zk.connection_closed(session);
        self.trace.note(self.view.now, Some(h), 'd', || {
            format!("credentials refused on reconnecting to session {session}")
        });
        self.view.refused = Some(super::view::Refused {
            host: h,
            session,
            at: self.view.now,
        });
        // Step checkers read the refusal: a pass from before it no longer
        // holds, whether it held until any change or until the counts'.
        self.view.counts.generation += 1;
        self.view.counts.version += 1;
        self.session_event(h, SessionEvent::AuthFailed);
    }

    pub(super) fn reconnect(&mut self, pid: usize) {
        let p = &self.view.procs[pid];
        // A client whose credentials were refused stops there.
        if p.conn == Conn::Connected
            || p.session_closed
            || self.view.refused.is_some_and(|r| r.host == pid)
        {
            return;
        }
        if !self.reachable(pid) {
            if self.asker_client_failed(pid, "no server could be reached") {
                return;
            }
            let at = self.view.now + Duration::from_millis(self.rng.range(200, 500));
            self.push(at, Ev::Reconnect { pid });
            return;
        }
        let identity = self.identity(Some(pid));
        // zookeeper-async replays its credentials on every connection after
        // its first (its connect does not carry them).
        let replays = self.view.procs[pid].session_id.is_some() && self.replays(pid);
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
                    let zk = &self.view.zk;
                    let negotiated = |i| zk.negotiate_at(i, requested);
                    if let Err(e) = crate::startup::check(&started, self.view.now, negotiated) {
                        self.start_up_violation(format!("p{pid}: {e}"));
                    }
                    self.view.zk.set_plan(pid, &started.plan.servers);
                    if source == TimeoutSource::Handshake {
                        self.view.procs[pid].handshaken = started.plan.bound;
                    }
                    // The machine lives on with a zkelect transport: it
                    // retries the client's attempts until the first
                    // connection, and zookeeper-async's confirms the bound
                    // at every one (a foreign model's Java client has none).
                    if matches!(self.view.procs[pid].member, Member::Zkelect { .. }) {
                        self.keep_asker(pid, started.machine);
                    }
                    self.view.procs[pid].started = Some(started.at);
                    if started.at > self.view.now {
                        self.push(started.at, Ev::Reconnect { pid });
                        return;
                    }
                }
                Err((refused_at, _)) => {
                    // No member answered by the connect timeout: the
                    // transport's `connect` fails then, and the application
                    // starts over a little later.
                    let at = refused_at + Duration::from_millis(self.rng.range(200, 500));
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
            self.view.procs[pid].session_id,
            requested,
            identity.as_deref(),
            forget,
            rearm,
        );
        let Ok(connected) = connected else {
            // Every member refused (behind the client, or cut off): the
            // start-up machine retries a first attempt; after that, the
            // client library tries again.
            if self.asker_client_failed(pid, "every server refused the connection") {
                return;
            }
            let at = self.view.now + Duration::from_millis(self.rng.range(200, 500));
            self.push(at, Ev::Reconnect { pid });
            return;
        };
        match connected {
            Reconnected::Same(_) if self.refused_now(pid) => return self.refuse(pid),
            Reconnected::Same(session) => {
                // The member clamped the session's timeout again, by its own
                // limits; the client library times itself by the new value.
                // (zookeeper-client reports its first connection's value,
                // the same one: its worlds give every member the same limits.)
                if let Some(timeout) = self.view.zk.session_timeout(session) {
                    self.view.procs[pid].timeout = timeout;
                }
            }
            Reconnected::Expired { new, timeout } => {
                // The server expired it while we were away: say so, then start afresh.
                self.view.procs[pid].session_id = None;
                self.session_event(pid, SessionEvent::Expired);
                self.view.procs[pid].session_id = Some(new);
                self.view.procs[pid].timeout = timeout;
            }
            Reconnected::New { session, timeout } => {
                self.view.procs[pid].session_id = Some(session);
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
        let (session_id, timeout, gen) = (p.session_id, p.timeout, p.gen);
        // The client library's own timing follows the session's timeout; what
        // it reports is what it learned.
        let first = match self.library(pid) {
            Library::Java => self.view.now + timeout / 3,
            Library::ZookeeperClient => self.view.now + timeout / 20,
            Library::ZookeeperAsync => self.view.now + timeout * 2 / 3,
        };
        self.schedule_tick(pid, first);
        if matches!(self.view.procs[pid].member, Member::Foreign(_)) {
            self.push(
                self.view.now + timeout * 2 / 3,
                Ev::ReadTimeout { pid, gen },
            );
        }
        let session_id = session_id.filter(|_| self.view.knobs.session_ids);
        if !self.asker_connected(pid, session_id, replays) {
            let learned = match source {
                TimeoutSource::Session => timeout,
                TimeoutSource::Handshake => self.view.procs[pid].handshaken.unwrap_or(timeout),
            };
            self.report_connected(pid, session_id, learned, replays);
        }
        // Re-armed watches whose node changed after what the client had seen.
        let fired = self.view.zk.take_fired();
        self.send_fired(fired);
    }

    /// The application closed the session (or foreign model) and then its
    /// client: the ZooKeeper session ends on the server (its ephemerals
    /// go), and requests still in flight are answered with `ConnectionLoss`
    /// by the client library.
    pub(super) fn close_client(&mut self, pid: usize) {
        let p = &mut self.view.procs[pid];
        p.session_closed = true;
        p.conn = Conn::Disconnected;
        p.replay = None;
        // The transport is closed with its client: no more asks.
        p.asker = None;
        p.gen += 1;
        let pending: Vec<OpId> = std::mem::take(&mut p.on_wire)
            .into_entries()
            .map(|(op, _)| op)
            .collect();
        if let Some(s) = p.session_id.take() {
            if self.server_up() {
                let fired = self.view.zk.close_session(s);
                self.send_fired(fired);
            }
            // With the server down, the session expires on its own later.
        }
        self.view.recount(pid);
        for op in pending {
            self.push(self.view.now, Ev::LocalFail { pid, op });
        }
    }

    /// Host `h`'s client sends `request` under `op` (the session's op id;
    /// a foreign model's own), from machine `from` (`None`: the session's
    /// probe); `cause` is the server change whose watch event woke it.
    pub(super) fn send(
        &mut self,
        h: usize,
        op: OpId,
        request: Request,
        from: Option<usize>,
        cause: Option<u64>,
    ) {
        let arms = from
            .and_then(|_| WatchClass::of(&request).map(|class| (request.path().to_owned(), class)));
        let request = match from.and_then(|pid| self.canary_of(pid).map(|c| (pid, c))) {
            Some((pid, canary)) => {
                canary.rewrite_request(request, &self.view.canary_view(pid, canary))
            }
            None => request,
        };
        if self
            .canary_of(h)
            .is_some_and(|c| c.answers_locally(&request))
        {
            let result = Box::new(Ok(Reply::Exists(None)));
            return self.push(self.view.now, Ev::LocalReply { pid: h, op, result });
        }
        if self.view.procs[h].conn != Conn::Connected
            || self.view.procs[h].session_closed
            || self.gated(h)
        {
            // A client that is not connected fails the request at once (as an event,
            // so a candidate that retries at once cannot recurse without end);
            // so does one replaying its credentials, whose core still holds
            // `Disconnected` (zookeeper-async's gate holds it until the
            // replay ends or its request timeout: the core, told nothing
            // new, takes either as a connection loss).
            return self.push(self.view.now, Ev::LocalFail { pid: h, op });
        }
        // The client library puts its connect string's chroot in front of
        // every path (and takes it off every path it hands back).
        let request = match self.chroot_of(h) {
            Some(root) => rooted(request, root),
            None => request,
        };
        let gen = self.view.procs[h].gen;
        self.view.procs[h].last_to_server = self.view.now;
        let request = Rc::new(request);
        self.view.procs[h].on_wire.insert(
            op,
            OnWire {
                request: Rc::clone(&request),
                arrived: false,
                from,
                arms,
            },
        );
        let at = self.server_arrival(h);
        self.push(
            at,
            Ev::Request {
                pid: h,
                gen,
                op,
                request,
                cause,
            },
        );
    }
}

/// `request` with `root` in front of its path, as a client library whose
/// connect string has that chroot sends it (`/` is the chroot itself).
fn rooted(request: Request, root: &str) -> Request {
    request.map_path(|path| {
        if path == "/" {
            root.to_owned()
        } else {
            format!("{root}{path}")
        }
    })
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
