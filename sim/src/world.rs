//! The simulated world: candidates, their client libraries, the links, the
//! server, the clock — and the checkers, run after every step.
//!
//! The client-library model is what a real ZooKeeper client does: it pings every
//! third of the session timeout, declares the connection lost when nothing came
//! from the server for two thirds of it, fails every request in flight with
//! `ConnectionLoss`, reconnects, and learns on reconnecting whether the server
//! expired the session (then it reports `Expired` and opens a new one). Messages
//! on one session are FIFO in each direction (a watch event the server sent
//! before a reply arrives before it), except that with `reorder` a reply may
//! overtake earlier watch events, as zookeeper-async lets it. Watches do not
//! survive a reconnect in this model (the zookeeper-async behaviour, the worst
//! case): the candidate must re-arm them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use zkelect_core::{
    Candidate, Command, Config, FencingToken, Input, Notice, OpId, Reply, Request, Role,
    SessionEvent, SessionId, Timestamp, WatchEvent, WatchStrategy, ZkCode,
};

use crate::client::{connection_lost, reconnect, Link, Reconnected};
use crate::swarm::{Canary, Fault, SimRng, Swarm};
use crate::trace::Trace;
use crate::zk::{Fired, ZkModel, ZkSettings};

/// The election path every simulated candidate uses.
pub const PATH: &str = "/svc/leader";

/// An invariant that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which checker.
    pub invariant: &'static str,
    /// When.
    pub at: Timestamp,
    /// After which step.
    pub step: u64,
    /// What exactly.
    pub detail: String,
}

#[derive(Debug, Clone)]
enum Ev {
    /// A request reaches the server.
    Request {
        pid: usize,
        gen: u64,
        op: OpId,
        request: Request,
    },
    /// A reply reaches the client.
    Reply {
        pid: usize,
        gen: u64,
        op: OpId,
        result: Result<Reply, ZkCode>,
    },
    /// A watch event reaches the client; `cause` ties it to the server change.
    Watch {
        pid: usize,
        gen: u64,
        event: WatchEvent,
        cause: u64,
    },
    /// A ping reaches the server.
    Ping {
        pid: usize,
        gen: u64,
    },
    /// The server's answer to a ping reaches the client.
    Pong {
        pid: usize,
        gen: u64,
    },
    /// The client library's heartbeat and disconnect check.
    ClientTick {
        pid: usize,
    },
    /// The client library tries to (re)connect.
    Reconnect {
        pid: usize,
    },
    /// The candidate asked to be woken.
    Timer {
        pid: usize,
    },
    /// The server checks for expired sessions.
    Expiry,
    /// A planned fault or intent.
    Fault(Fault),
    /// The server is back.
    ServerUp,
    /// End of a process pause.
    Resume {
        pid: usize,
    },
    /// The server closed the connection (it expired the session).
    Closed {
        pid: usize,
        gen: u64,
    },
    /// The client library fails a request locally (not connected).
    LocalFail {
        pid: usize,
        op: OpId,
    },
    /// Chaos is over: check liveness after the bound.
    CheckLiveness,
    /// Close every candidate, then check for leaks.
    CloseAll,
    CheckLeaks,
}

impl Ev {
    fn pid(&self) -> Option<usize> {
        match self {
            Self::Reply { pid, .. }
            | Self::Watch { pid, .. }
            | Self::Pong { pid, .. }
            | Self::ClientTick { pid }
            | Self::Reconnect { pid }
            | Self::Timer { pid }
            | Self::LocalFail { pid, .. }
            | Self::Closed { pid, .. } => Some(*pid),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    Connected,
    Disconnected,
}

#[derive(Debug, Clone)]
struct Proc {
    c: Candidate,
    crashed: bool,
    session: Option<SessionId>,
    timeout: Duration,
    conn: Conn,
    gen: u64,
    last_from_server: Timestamp,
    /// Requests sent on the current connection and not yet answered; `true` once the server has it.
    inflight: BTreeMap<OpId, (Request, bool)>,
    answered: BTreeSet<OpId>,
    paused_until: Option<Timestamp>,
    partitioned_until: Option<Timestamp>,
    link: Link,
    timer_at: Option<Timestamp>,
    session_closed: bool,
    canary: Option<Canary>,
}

/// Counters of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Events processed.
    pub steps: u64,
    /// Requests the server applied.
    pub server_ops: u64,
    /// Elections seen.
    pub elections: u64,
    /// Faults injected.
    pub faults: u64,
    /// Stale writes the fenced resource rejected (pause runs).
    pub fenced_rejections: u64,
}

/// A whole simulated run.
pub struct World {
    seed: u64,
    swarm: Swarm,
    rng: SimRng,
    now: Timestamp,
    seq: u64,
    queue: BTreeMap<(Timestamp, u64), Ev>,
    zk: ZkModel,
    procs: Vec<Proc>,
    server_down_until: Option<Timestamp>,
    canary: Option<Canary>,
    /// A changing cause id for watch events, one per server change.
    cause: u64,
    /// cause → candidates that issued a read when its event reached them.
    woken: BTreeMap<u64, BTreeSet<usize>>,
    max_elected: Option<FencingToken>,
    last_leader: Option<(usize, FencingToken)>,
    resource_max: Option<FencingToken>,
    heal_at: Timestamp,
    pub(crate) trace: Trace,
    stats: RunStats,
    violation: Option<Violation>,
    done: bool,
    narrate: bool,
    story: Vec<(Timestamp, String)>,
}

impl World {
    /// A world for `seed` running `swarm`, optionally with canary candidates.
    pub fn new(seed: u64, swarm: Swarm, canary: Option<Canary>, keep_trace: bool) -> Self {
        let heal_at = Timestamp::ZERO + swarm.chaos;
        let mut world = Self {
            seed,
            rng: SimRng::new(seed, 2),
            now: Timestamp::ZERO,
            seq: 0,
            queue: BTreeMap::new(),
            zk: ZkModel::new(ZkSettings {
                tick: Duration::from_millis(200),
                cversion_start: if seed % 7 == 3 { i32::MAX - 20 } else { 0 },
            }),
            procs: Vec::new(),
            server_down_until: None,
            canary,
            cause: 0,
            woken: BTreeMap::new(),
            max_elected: None,
            last_leader: None,
            resource_max: None,
            heal_at,
            trace: Trace::new(keep_trace),
            stats: RunStats::default(),
            violation: None,
            done: false,
            narrate: false,
            story: Vec::new(),
            swarm,
        };
        for _ in 0..world.swarm.candidates {
            world.spawn();
        }
        for (at, fault) in world.swarm.plan.clone() {
            world.push(at, Ev::Fault(fault));
        }
        world.push(Timestamp::from_millis(200), Ev::Expiry);
        world.push(heal_at + world.liveness_bound(), Ev::CheckLiveness);
        world
    }

    /// Records a human-readable story of the run (for `zkelect demo`).
    pub fn narrate(&mut self) {
        self.narrate = true;
    }

    /// The story so far: what each candidate was told, and every fault.
    pub fn story(&self) -> &[(Timestamp, String)] {
        &self.story
    }

    fn tell(&mut self, line: String) {
        if self.narrate {
            self.story.push((self.now, line));
        }
    }

    /// How long after the faults stop a leader must exist: every session of a
    /// dead process expires within one timeout, the others reconnect within a
    /// second, and a retry waits at most the backoff maximum.
    pub fn liveness_bound(&self) -> Duration {
        self.swarm.session_timeout * 2 + Duration::from_secs(4)
    }

    fn push(&mut self, at: Timestamp, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at.max(self.now), self.seq), ev);
    }

    fn latency(&mut self) -> Duration {
        Duration::from_millis(self.rng.range(1, 8))
    }

    fn spawn(&mut self) {
        let pid = self.procs.len();
        let mut builder = Config::builder(PATH, format!("p{pid}"))
            .leaders(self.swarm.leaders)
            .policy(self.swarm.policy)
            .nonce_seed(self.seed.wrapping_mul(31).wrapping_add(pid as u64))
            .backoff(Duration::from_millis(50), Duration::from_secs(2));
        match self.canary {
            Some(Canary::IgnoresDisconnect) => builder = builder.probe(false),
            Some(Canary::Unprotected) => builder = builder.protected_create(false),
            Some(Canary::ParentWatch) => builder = builder.strategy(WatchStrategy::Parent),
            None => {}
        }
        let config = match builder.build() {
            Ok(c) => c,
            Err(e) => return self.fail("config", format!("{e}")),
        };
        let mut c = Candidate::new(config);
        c.join(self.now);
        self.procs.push(Proc {
            c,
            crashed: false,
            session: None,
            timeout: self.swarm.session_timeout,
            conn: Conn::Disconnected,
            gen: 0,
            last_from_server: self.now,
            inflight: BTreeMap::new(),
            answered: BTreeSet::new(),
            paused_until: None,
            partitioned_until: None,
            link: Link::default(),
            timer_at: None,
            session_closed: false,
            canary: self.canary,
        });
        let at = self.now + Duration::from_millis(self.rng.range(0, 50));
        self.push(at, Ev::Reconnect { pid });
    }

    fn fail(&mut self, invariant: &'static str, detail: String) {
        if self.violation.is_none() {
            self.trace.note(
                self.now,
                None,
                '!',
                format!("VIOLATION {invariant}: {detail}"),
            );
            self.violation = Some(Violation {
                invariant,
                at: self.now,
                step: self.stats.steps,
                detail,
            });
        }
    }

    fn server_up(&self) -> bool {
        self.server_down_until.is_none()
    }

    fn linked(&self, pid: usize) -> bool {
        let p = &self.procs[pid];
        !p.crashed && p.partitioned_until.is_none_or(|t| self.now >= t) && self.server_up()
    }

    /// A message crossing a partitioned link waits for the partition to end, as
    /// TCP would retransmit it; it is lost only if the connection is declared
    /// dead meanwhile (its generation no longer matches).
    fn held_by_partition(&mut self, pid: usize, ev: &Ev) -> bool {
        match self.procs[pid].partitioned_until {
            Some(until) if self.now < until => {
                let at = until + Duration::from_millis(1);
                self.push(at, ev.clone());
                true
            }
            _ => false,
        }
    }

    /// Runs to the end; returns the violation, if any.
    pub fn run(&mut self) -> Option<Violation> {
        while !self.done && self.violation.is_none() {
            let Some(((at, _), ev)) = self.queue.pop_first() else {
                break;
            };
            self.now = at;
            self.step(ev);
        }
        self.violation.clone()
    }

    /// The run's counters.
    pub fn stats(&self) -> RunStats {
        RunStats {
            server_ops: self.zk.ops(),
            ..self.stats
        }
    }

    /// The scenario.
    pub fn swarm(&self) -> &Swarm {
        &self.swarm
    }

    fn step(&mut self, ev: Ev) {
        self.stats.steps += 1;
        // A paused process handles nothing: its events wait for it, in order.
        if let Some(pid) = ev.pid() {
            if self.procs[pid].crashed {
                return;
            }
            if let Some(until) = self.procs[pid].paused_until {
                if self.now < until {
                    self.push(until, ev);
                    return;
                }
            }
        }
        let crossing = match &ev {
            Ev::Request { pid, .. }
            | Ev::Reply { pid, .. }
            | Ev::Watch { pid, .. }
            | Ev::Ping { pid, .. }
            | Ev::Pong { pid, .. }
            | Ev::Closed { pid, .. } => Some(*pid),
            _ => None,
        };
        if let Some(pid) = crossing {
            if self.held_by_partition(pid, &ev) {
                return;
            }
        }
        match ev {
            Ev::Request {
                pid,
                gen,
                op,
                request,
            } => self.on_request(pid, gen, op, request),
            Ev::Reply {
                pid,
                gen,
                op,
                result,
            } => {
                if self.procs[pid].gen != gen || !self.linked(pid) {
                    return;
                }
                self.procs[pid].last_from_server = self.now;
                if self.procs[pid].inflight.remove(&op).is_some() {
                    self.deliver_reply(pid, op, result);
                }
            }
            Ev::Watch {
                pid,
                gen,
                event,
                cause,
            } => {
                if self.procs[pid].gen != gen || !self.linked(pid) {
                    return;
                }
                self.procs[pid].last_from_server = self.now;
                let glyph_text = format!("watch {:?} {}", event.kind, short(&event.path));
                self.feed(pid, Input::Watch(event), Some(cause), glyph_text);
            }
            Ev::Ping { pid, gen } => {
                if self.procs[pid].gen == gen && self.linked(pid) {
                    if let Some(s) = self.procs[pid].session {
                        self.zk.touch(self.now, s);
                    }
                    let at = self.client_arrival(pid);
                    self.push(at, Ev::Pong { pid, gen });
                }
            }
            Ev::Pong { pid, gen } => {
                if self.procs[pid].gen == gen && self.linked(pid) {
                    self.procs[pid].last_from_server = self.now;
                }
            }
            Ev::ClientTick { pid } => self.client_tick(pid),
            Ev::Reconnect { pid } => self.reconnect(pid),
            Ev::Timer { pid } => {
                if self.procs[pid]
                    .c
                    .poll_timeout()
                    .is_some_and(|t| t <= self.now)
                {
                    self.procs[pid].timer_at = None;
                    self.procs[pid].c.handle_timeout(self.now);
                    self.after(pid, None, "timer".into());
                }
            }
            Ev::Expiry => {
                if self.server_up() {
                    let (expired, fired) = self.zk.expire_due(self.now);
                    for s in expired {
                        self.trace
                            .note(self.now, None, 'x', format!("server expired session {s}"));
                        // The server closes an expired session's connection.
                        if let Some(pid) = self.procs.iter().position(|p| p.session == Some(s)) {
                            self.tell(format!(
                                "the server expires p{pid}'s session; its node goes with it"
                            ));
                            if self.procs[pid].conn == Conn::Connected {
                                let gen = self.procs[pid].gen;
                                let at = self.client_arrival(pid);
                                self.push(at, Ev::Closed { pid, gen });
                            }
                        }
                    }
                    self.send_fired(fired);
                }
                self.push(self.now + Duration::from_millis(200), Ev::Expiry);
            }
            Ev::Fault(fault) => self.inject(fault),
            Ev::ServerUp => {
                self.server_down_until = None;
                self.zk.restart_session_timers(self.now);
                self.trace.note(self.now, None, 'S', "server up".into());
            }
            Ev::Closed { pid, gen } => {
                if self.procs[pid].gen == gen {
                    self.disconnect(pid, "the server closed the connection");
                }
            }
            Ev::LocalFail { pid, op } => self.deliver_reply(pid, op, Err(ZkCode::ConnectionLoss)),
            Ev::Resume { pid } => {
                self.procs[pid].paused_until = None;
                self.trace.note(self.now, Some(pid), 'r', "resumed".into());
            }
            Ev::CheckLiveness => self.check_liveness(),
            Ev::CloseAll => {
                for pid in 0..self.procs.len() {
                    if !self.procs[pid].crashed {
                        self.procs[pid].c.close(self.now);
                        self.after(pid, None, "close (end of run)".into());
                    }
                }
                let t = self.swarm.session_timeout;
                self.push(self.now + t * 2 + Duration::from_secs(3), Ev::CheckLeaks);
            }
            Ev::CheckLeaks => {
                let left = self.zk.children(PATH);
                if !left.is_empty() {
                    self.fail(
                        "no-leaks",
                        format!("election path still holds {left:?} after everyone closed"),
                    );
                }
                self.done = true;
            }
        }
        self.check_safety();
    }

    fn client_arrival(&mut self, pid: usize) -> Timestamp {
        let lat = self.latency();
        self.procs[pid].link.to_client(self.now, lat)
    }

    fn server_arrival(&mut self, pid: usize) -> Timestamp {
        let lat = self.latency();
        self.procs[pid].link.to_server(self.now, lat)
    }

    fn on_request(&mut self, pid: usize, gen: u64, op: OpId, request: Request) {
        if self.procs[pid].gen != gen || !self.linked(pid) {
            return;
        }
        let Some(session) = self.procs[pid].session else {
            return;
        };
        if let Some(entry) = self.procs[pid].inflight.get_mut(&op) {
            entry.1 = true;
        }
        let (result, fired) = self.zk.apply(self.now, session, &request);
        self.send_fired(fired);
        // With reorder, a reply may overtake watch events already on their way.
        let at = if self.swarm.reorder && self.rng.chance(0.2) {
            self.now + Duration::from_millis(1)
        } else {
            self.client_arrival(pid)
        };
        self.push(
            at,
            Ev::Reply {
                pid,
                gen,
                op,
                result,
            },
        );
    }

    /// Sends fired watches to their clients. Each deleted node is its own cause
    /// (the herd checker counts whom one deletion woke); other changes share one.
    fn send_fired(&mut self, fired: Vec<Fired>) {
        if fired.is_empty() {
            return;
        }
        self.cause += 1;
        let shared = self.cause;
        let mut per_path: BTreeMap<String, u64> = BTreeMap::new();
        for f in fired {
            let cause = if f.event.kind == zkelect_core::WatchKind::NodeDeleted {
                let next = self.cause + 1;
                *per_path.entry(f.event.path.clone()).or_insert_with(|| next)
            } else {
                shared
            };
            self.cause = self.cause.max(cause);
            let Some(pid) = self.procs.iter().position(|p| p.session == Some(f.session)) else {
                continue;
            };
            if self.procs[pid].conn != Conn::Connected {
                continue;
            }
            let gen = self.procs[pid].gen;
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

    fn client_tick(&mut self, pid: usize) {
        let p = &self.procs[pid];
        if p.conn != Conn::Connected {
            return;
        }
        let timeout = p.timeout;
        if connection_lost(self.now, p.last_from_server, timeout) {
            self.disconnect(
                pid,
                "no answer from the server for 2/3 of the session timeout",
            );
            return;
        }
        let gen = p.gen;
        let at = self.server_arrival(pid);
        self.push(at, Ev::Ping { pid, gen });
        self.push(self.now + timeout / 3, Ev::ClientTick { pid });
    }

    /// The client library declares the connection lost.
    fn disconnect(&mut self, pid: usize, why: &str) {
        if self.procs[pid].conn != Conn::Connected {
            return;
        }
        self.trace
            .note(self.now, Some(pid), 'd', format!("disconnected: {why}"));
        let p = &mut self.procs[pid];
        p.conn = Conn::Disconnected;
        p.gen += 1;
        let failed: Vec<OpId> = std::mem::take(&mut p.inflight).into_keys().collect();
        if p.canary != Some(Canary::IgnoresDisconnect) {
            self.feed(
                pid,
                Input::Session(SessionEvent::Disconnected),
                None,
                "session Disconnected".into(),
            );
        }
        for op in failed {
            self.deliver_reply(pid, op, Err(ZkCode::ConnectionLoss));
        }
        let at = self.now + Duration::from_millis(self.rng.range(100, 400));
        self.push(at, Ev::Reconnect { pid });
    }

    fn reconnect(&mut self, pid: usize) {
        let p = &self.procs[pid];
        if p.conn == Conn::Connected || p.session_closed {
            return;
        }
        if !self.linked(pid) {
            let at = self.now + Duration::from_millis(self.rng.range(200, 500));
            self.push(at, Ev::Reconnect { pid });
            return;
        }
        match reconnect(
            &mut self.zk,
            self.now,
            self.procs[pid].session,
            self.swarm.session_timeout,
        ) {
            Reconnected::Same(_) => {}
            Reconnected::Expired { new, timeout } => {
                // The server expired it while we were away: say so, then start afresh.
                self.procs[pid].session = None;
                self.feed(
                    pid,
                    Input::Session(SessionEvent::Expired),
                    None,
                    "session Expired".into(),
                );
                self.procs[pid].session = Some(new);
                self.procs[pid].timeout = timeout;
            }
            Reconnected::New { session, timeout } => {
                self.procs[pid].session = Some(session);
                self.procs[pid].timeout = timeout;
            }
        }
        let p = &mut self.procs[pid];
        p.conn = Conn::Connected;
        p.gen += 1;
        p.last_from_server = self.now;
        let (session_id, timeout) = (p.session, p.timeout);
        self.push(self.now + timeout / 3, Ev::ClientTick { pid });
        self.feed(
            pid,
            Input::Session(SessionEvent::Connected {
                session_id,
                timeout,
            }),
            None,
            format!(
                "session Connected {}",
                session_id.map_or(String::new(), |s| s.to_string())
            ),
        );
    }

    fn deliver_reply(&mut self, pid: usize, op: OpId, result: Result<Reply, ZkCode>) {
        if !self.procs[pid].answered.insert(op) {
            return self.fail("one-answer", format!("p{pid} op {op} answered twice"));
        }
        let text = match &result {
            Ok(r) => format!("reply {op} {}", reply_text(r)),
            Err(e) => format!("reply {op} err {e}"),
        };
        self.feed(pid, Input::Reply { op, result }, None, text);
    }

    fn feed(&mut self, pid: usize, input: Input, cause: Option<u64>, text: String) {
        self.procs[pid].c.handle(self.now, input);
        self.after(pid, cause, text);
    }

    /// Drains the candidate (notices, commands, timeout) after it handled something.
    fn after(&mut self, pid: usize, cause: Option<u64>, text: String) {
        let mut notices = Vec::new();
        while let Some(n) = self.procs[pid].c.poll_notice() {
            notices.push(n);
        }
        for n in &notices {
            self.on_notice(pid, n);
        }
        let mut commands = Vec::new();
        while let Some(cmd) = self.procs[pid].c.poll_command() {
            commands.push(cmd);
        }
        if let Some(cause) = cause {
            let reads = commands.iter().any(|c| {
                matches!(
                    c.request,
                    Request::GetChildren { .. } | Request::GetData { .. }
                )
            });
            if reads {
                self.woken.entry(cause).or_default().insert(pid);
                self.check_herd(cause);
            }
        }
        let p = &self.procs[pid];
        self.trace.step(
            self.now,
            pid,
            p.c.role(),
            p.c.node(),
            p.c.watching(),
            &text,
            &notices,
            commands.len(),
        );
        for Command { op, request } in commands {
            self.send(pid, op, request);
        }
        if self.procs[pid].c.is_closed() && !self.procs[pid].session_closed {
            self.procs[pid].session_closed = true;
            if let Some(s) = self.procs[pid].session.take() {
                let fired = self.zk.close_session(s);
                self.send_fired(fired);
            }
        }
        let next = self.procs[pid].c.poll_timeout();
        if next.is_some() && next != self.procs[pid].timer_at {
            self.procs[pid].timer_at = next;
            if let Some(at) = next {
                self.push(at, Ev::Timer { pid });
            }
        }
        // The fenced resource: a leader writes with its token after every step it takes.
        if let Role::Leader(token) = self.procs[pid].c.role() {
            self.fenced_write(pid, token);
        }
    }

    fn send(&mut self, pid: usize, op: OpId, request: Request) {
        if self.procs[pid].conn != Conn::Connected || self.procs[pid].session_closed {
            // A client that is not connected fails the request at once (as an event,
            // so a candidate that retries at once cannot recurse without end).
            return self.push(self.now, Ev::LocalFail { pid, op });
        }
        let gen = self.procs[pid].gen;
        self.procs[pid]
            .inflight
            .insert(op, (request.clone(), false));
        let at = self.server_arrival(pid);
        self.push(
            at,
            Ev::Request {
                pid,
                gen,
                op,
                request,
            },
        );
    }

    fn on_notice(&mut self, pid: usize, notice: &Notice) {
        if self.narrate {
            let line = match notice {
                Notice::Joined { node } => {
                    Some(format!("p{pid} joined the queue as {}", short(node)))
                }
                Notice::Elected { token } => {
                    Some(format!("p{pid} is elected leader (fencing token {token})"))
                }
                Notice::Demoted { reason } => Some(format!("p{pid} stops leading: {reason}")),
                Notice::Suspended => {
                    Some(format!("p{pid} lost contact with the server: suspended"))
                }
                Notice::Resumed => Some(format!("p{pid} is back in contact with the server")),
                Notice::LeaderChanged { .. } => None,
                Notice::Error(e) => Some(format!("p{pid} failed: {e}")),
            };
            if let Some(line) = line {
                self.tell(line);
            }
        }
        if let Notice::Elected { token } = notice {
            self.stats.elections += 1;
            if self.swarm.leaders == 1 {
                if let Some((last_pid, last)) = self.last_leader {
                    if *token < last || (*token == last && last_pid != pid) {
                        self.fail(
                            "tokens-grow",
                            format!(
                                "p{pid} elected with token {token} after p{last_pid} had {last}"
                            ),
                        );
                    }
                }
                self.last_leader = Some((pid, *token));
            }
            self.max_elected = Some(self.max_elected.map_or(*token, |m| m.max(*token)));
        }
    }

    fn fenced_write(&mut self, pid: usize, token: FencingToken) {
        if !self.swarm.pauses {
            return;
        }
        let deposed = self.max_elected.is_some_and(|m| token < m);
        let accepted = self.resource_max.is_none_or(|m| token >= m);
        if accepted {
            if deposed {
                let newest = self.max_elected.map_or(0, |t| t.0);
                return self.fail(
                    "fencing",
                    format!("p{pid} wrote with token {token} after token {newest} was elected, and the resource accepted it"),
                );
            }
            self.resource_max = Some(token);
        } else {
            self.stats.fenced_rejections += 1;
        }
    }

    fn check_herd(&mut self, cause: u64) {
        if self.canary != Some(Canary::ParentWatch)
            && self
                .procs
                .iter()
                .any(|p| p.c.config().strategy() != WatchStrategy::Predecessor)
        {
            return;
        }
        // A follower watches the k nodes below it, so one deletion may wake k of them; never more.
        let woken = self.woken.get(&cause).map_or(0, BTreeSet::len);
        if woken > self.swarm.leaders as usize {
            let who: Vec<usize> = self.woken[&cause].iter().copied().collect();
            self.fail(
                "no-herd",
                format!("one change woke {woken} followers: {who:?}"),
            );
        }
    }

    fn check_safety(&mut self) {
        if self.swarm.pauses {
            return;
        }
        let leaders: Vec<usize> = (0..self.procs.len())
            .filter(|&i| !self.procs[i].crashed && self.procs[i].c.role().is_leader())
            .collect();
        if leaders.len() > self.swarm.leaders as usize {
            let detail = leaders
                .iter()
                .map(|&i| format!("p{i}({:?})", self.procs[i].c.role()))
                .collect::<Vec<_>>()
                .join(", ");
            self.fail(
                "safety",
                format!(
                    "{} leaders at once, at most {}: {detail}",
                    leaders.len(),
                    self.swarm.leaders
                ),
            );
        }
    }

    fn check_liveness(&mut self) {
        let live: Vec<usize> = (0..self.procs.len())
            .filter(|&i| {
                let p = &self.procs[i];
                !p.crashed && !matches!(p.c.role(), Role::Idle | Role::Closed | Role::Failed)
            })
            .collect();
        let leaders = live
            .iter()
            .filter(|&&i| self.procs[i].c.role().is_leader())
            .count();
        let want = live.len().min(self.swarm.leaders as usize);
        if leaders < want {
            let roles: Vec<String> = live
                .iter()
                .map(|&i| format!("p{i}:{:?}", self.procs[i].c.role()))
                .collect();
            self.fail(
                "liveness",
                format!(
                    "{leaders} leader(s) {}ms after the faults stopped, want {want}; live: {}",
                    self.liveness_bound().as_millis(),
                    roles.join(" ")
                ),
            );
        }
        self.push(self.now + Duration::from_millis(100), Ev::CloseAll);
    }

    fn inject(&mut self, fault: Fault) {
        if self.now >= self.heal_at {
            return;
        }
        let valid = |pid: usize, w: &Self| pid < w.procs.len() && !w.procs[pid].crashed;
        self.stats.faults += 1;
        self.trace
            .note(self.now, None, 'F', format!("fault: {fault}"));
        let told = match fault {
            Fault::Crash { pid } => Some(format!(
                "p{pid} crashes (its session lives on until the server expires it)"
            )),
            Fault::Partition { pid, ms } => {
                Some(format!("p{pid} is cut off from the server for {ms}ms"))
            }
            Fault::Close { pid } => Some(format!("p{pid} shuts down cleanly")),
            Fault::DropConnection { pid, .. } => Some(format!("p{pid}'s connection drops")),
            Fault::Pause { pid, ms } => Some(format!("p{pid} freezes for {ms}ms")),
            Fault::RestartServer { ms } => Some(format!("the server restarts ({ms}ms down)")),
            Fault::Spawn => Some(format!("a new candidate p{} starts", self.procs.len())),
            Fault::Resign { pid, .. } => Some(format!("p{pid} resigns")),
            _ => None,
        };
        if let Some(line) = told {
            self.tell(line);
        }
        match fault {
            Fault::DropConnection { pid, applied } if valid(pid, self) => {
                if applied {
                    // Requests still on their way reach the server anyway; their replies are lost.
                    let pending: Vec<(OpId, Request)> = self.procs[pid]
                        .inflight
                        .iter()
                        .filter(|(_, (_, arrived))| !arrived)
                        .map(|(op, (r, _))| (*op, r.clone()))
                        .collect();
                    if let Some(s) = self.procs[pid].session {
                        for (_, request) in pending {
                            if self.server_up() {
                                let (_, fired) = self.zk.apply(self.now, s, &request);
                                self.send_fired(fired);
                            }
                        }
                    }
                }
                self.disconnect(pid, "connection dropped");
            }
            Fault::Partition { pid, ms } if valid(pid, self) => {
                self.procs[pid].partitioned_until = Some(self.now + Duration::from_millis(ms));
            }
            Fault::Pause { pid, ms } if valid(pid, self) => {
                let until = self.now + Duration::from_millis(ms);
                self.procs[pid].paused_until = Some(until);
                self.push(until, Ev::Resume { pid });
            }
            Fault::Crash { pid } if valid(pid, self) => self.procs[pid].crashed = true,
            Fault::RestartServer { ms } if self.server_down_until.is_none() => {
                self.server_down_until = Some(self.now + Duration::from_millis(ms));
                for pid in 0..self.procs.len() {
                    if self.procs[pid].crashed || self.procs[pid].conn != Conn::Connected {
                        continue;
                    }
                    if self.procs[pid].paused_until.is_none() {
                        self.disconnect(pid, "server restarting");
                    } else {
                        // Every connection is reset; a paused process learns it on resuming.
                        let gen = self.procs[pid].gen;
                        self.push(self.now, Ev::Closed { pid, gen });
                    }
                }
                self.push(self.now + Duration::from_millis(ms), Ev::ServerUp);
            }
            Fault::Resign { pid, rejoin }
                if valid(pid, self) && self.procs[pid].paused_until.is_none() =>
            {
                self.procs[pid].c.resign(self.now, rejoin);
                self.after(pid, None, format!("resign rejoin={rejoin}"));
            }
            Fault::Close { pid } if valid(pid, self) && self.procs[pid].paused_until.is_none() => {
                self.procs[pid].c.close(self.now);
                self.after(pid, None, "close".into());
            }
            Fault::Spawn => self.spawn(),
            Fault::CrashLeader | Fault::PartitionLeader { .. } | Fault::CloseLeader => {
                let leader = (0..self.procs.len()).find(|&i| {
                    let p = &self.procs[i];
                    !p.crashed && p.paused_until.is_none() && p.c.role().is_leader()
                });
                if let Some(pid) = leader {
                    let targeted = match fault {
                        Fault::CrashLeader => Fault::Crash { pid },
                        Fault::PartitionLeader { ms } => Fault::Partition { pid, ms },
                        _ => Fault::Close { pid },
                    };
                    self.inject(targeted);
                }
            }
            _ => {}
        }
    }

    /// The election path's children right now (for tests and the demo).
    pub fn children(&self) -> Vec<String> {
        self.zk.children(PATH)
    }
}

fn short(path: &str) -> &str {
    path.strip_prefix(PATH)
        .map_or(path, |p| p.trim_start_matches('/'))
}

fn reply_text(r: &Reply) -> String {
    match r {
        Reply::Created { path, stat } => format!("created {} czxid={}", short(path), stat.czxid),
        Reply::Children(c) => format!("children[{}]", c.len()),
        Reply::Data { .. } => "data".into(),
        Reply::Exists(s) => format!("exists={}", s.is_some()),
        Reply::Deleted => "deleted".into(),
    }
}
