//! The simulated world: candidates, their client libraries, the links, the
//! server, the clock, the fenced resource — and the checkers, run after every
//! step.
//!
//! # The step
//!
//! The world is an event heap keyed by `(virtual time, sequence number)`. A step
//! pops the earliest event, moves the clock to it, and delivers it: to the
//! server model (a request, a ping), to a process's client library (a reply, a
//! watch event, its heartbeat tick, a reconnect attempt), to a candidate (its
//! timer), or to the world (a fault, the end of a pause). Whenever a candidate
//! handled something, the world drains it — notices, then commands, then
//! `poll_timeout` — and sends what it asked for. Every command is answered
//! exactly once: by the server's reply, or with `ConnectionLoss` by the client
//! library when the connection drops or the client is closed first. After every
//! step every [`Invariant`] runs.
//!
//! # The client library
//!
//! See [`crate::client`]: pings every third of the session timeout, connection
//! declared lost after two thirds of silence, reconnect, `Expired` learned on
//! reconnecting, watches lost with the connection. Messages on one connection
//! are FIFO in each direction; with `reorder` a reply may overtake watch events
//! sent before it (zookeeper-async does this). A paused process (candidate and
//! client library alike) handles nothing until it resumes, then its backlog in
//! order; the server and everyone else go on meanwhile.
//!
//! # The world around the candidates
//!
//! The swarm's [`Env`](crate::swarm::Env) sets the server's session limits,
//! the candidates' interop scheme, the foreign contenders (processes whose
//! [`Agent`] is a model of Curator's or kazoo's recipe, pids after the zkelect
//! candidates) and the persistent look-alikes an operator creates before anyone
//! joins (and, by [`Fault::Lookalike`], later). Canaries apply to zkelect
//! candidates only.
//!
//! # Phases
//!
//! Chaos (the fault plan), then the faults stop ([`Phase::Healed`]); after
//! [`World::liveness_bound`] the leaders must be there and stay
//! ([`Phase::Settled`]); then every candidate closes ([`Phase::Closing`]) and,
//! once dead sessions had time to expire, the run ends with the leak check.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use zkelect_core::{
    Acl, Candidate, Command, Config, ConfigBuilder, CreateMode, FencingToken, Input, Notice, OpId,
    Reply, Request, Role, SessionEvent, SessionId, Stat, Timestamp, WatchEvent, WatchKind, ZkCode,
};

use crate::canary::Canary;
use crate::check::{self, Event, Invariant};
use crate::client::{connection_lost, handshake, reconnect, Link, Reconnected, TimeoutSource};
use crate::foreign::{lookalike_stem, Agent, CuratorLatch, KazooLock, Scheme};
use crate::rng::SimRng;
use crate::swarm::{Fault, Knobs, Swarm};
use crate::trace::Trace;
use crate::zk::{Fired, ZkModel};

/// The election path every simulated candidate uses.
pub const PATH: &str = "/svc/leader";

/// The identity every session authenticates as when the candidates' ACL needs one.
pub const IDENTITY: &str = "digest:svc";

/// The longest a client library's event thread lags behind its replies
/// (under [`Fault::LagEvents`]).
pub const EVENT_LAG_MAX_MS: u64 = 60;

/// How long the leaders must stay in place after the liveness bound, before the
/// candidates are closed.
pub const SETTLE: Duration = Duration::from_secs(2);

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

/// Where the run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// The fault plan is running.
    Chaos,
    /// The faults have stopped; the leaders may still be on their way.
    Healed,
    /// The liveness bound has passed: the leaders must be there.
    Settled,
    /// The candidates are closing; then the leak check.
    Closing,
}

#[derive(Debug, Clone)]
enum Ev {
    /// A request reaches the server; `cause` is the server change whose watch
    /// event made the candidate send it, if it was sent on waking.
    Request {
        pid: usize,
        gen: u64,
        op: OpId,
        request: Request,
        cause: Option<u64>,
    },
    /// A reply reaches the client.
    Reply {
        pid: usize,
        gen: u64,
        op: OpId,
        result: Result<Reply, ZkCode>,
    },
    /// A watch event reaches the client; `cause` names the server change.
    Watch {
        pid: usize,
        gen: u64,
        event: WatchEvent,
        cause: u64,
    },
    /// The client library hands a received watch event to the application
    /// late (its event thread lagged).
    Event {
        pid: usize,
        event: WatchEvent,
        cause: u64,
    },
    /// A ping reaches the server.
    Ping { pid: usize, gen: u64 },
    /// The server's answer to a ping reaches the client.
    Pong { pid: usize, gen: u64 },
    /// The client library's heartbeat and disconnect check.
    ClientTick { pid: usize },
    /// A foreign model's client library checks its read timeout (exactly two
    /// thirds of the session timeout after the last message from the server).
    ReadTimeout { pid: usize, gen: u64 },
    /// The client library tries to (re)connect.
    Reconnect { pid: usize },
    /// The candidate asked to be woken.
    Timer { pid: usize },
    /// The server checks for expired sessions (every tick).
    Expiry,
    /// A planned fault or intent.
    Fault(Fault),
    /// The server is back.
    ServerUp,
    /// End of a process pause.
    Resume { pid: usize },
    /// The server closed the connection (it expired the session, or restarted).
    Closed { pid: usize, gen: u64 },
    /// The client library fails a request locally (not connected, or closed).
    LocalFail { pid: usize, op: OpId },
    /// A leader's application checks its role and, if leading, writes.
    AppWrite { pid: usize },
    /// A write reaches the fenced resource.
    Write { pid: usize, token: FencingToken },
    /// The faults stop.
    Heal,
    /// The liveness bound has passed.
    LivenessDue,
    /// Close every candidate.
    CloseAll,
    /// The end: leak check and the last checks.
    End,
}

impl Ev {
    /// The process that handles this event (and so waits while it is paused,
    /// and never handles it if it crashed).
    fn handler(&self) -> Option<usize> {
        match self {
            Self::Reply { pid, .. }
            | Self::Watch { pid, .. }
            | Self::Pong { pid, .. }
            | Self::ClientTick { pid }
            | Self::ReadTimeout { pid, .. }
            | Self::Reconnect { pid }
            | Self::Timer { pid }
            | Self::LocalFail { pid, .. }
            | Self::Closed { pid, .. }
            | Self::Event { pid, .. }
            | Self::AppWrite { pid }
            | Self::Write { pid, .. } => Some(*pid),
            _ => None,
        }
    }

    /// The process whose network link this message crosses.
    fn crossing(&self) -> Option<usize> {
        match self {
            Self::Request { pid, .. }
            | Self::Reply { pid, .. }
            | Self::Watch { pid, .. }
            | Self::Ping { pid, .. }
            | Self::Pong { pid, .. }
            | Self::Closed { pid, .. } => Some(*pid),
            _ => None,
        }
    }
}

/// Which directions a partition cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    Both,
    ToServer,
    ToClient,
}

impl Cut {
    fn blocks(self, to_server: bool) -> bool {
        match self {
            Cut::Both => true,
            Cut::ToServer => to_server,
            Cut::ToClient => !to_server,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    Connected,
    Disconnected,
}

#[derive(Debug, Clone)]
struct Inflight {
    request: Request,
    /// The server has it.
    arrived: bool,
}

#[derive(Debug, Clone)]
struct Proc {
    c: Agent,
    crashed: bool,
    session: Option<SessionId>,
    timeout: Duration,
    /// The timeout the client learned by its own handshake (zookeeper-async).
    handshaken: Option<Duration>,
    conn: Conn,
    gen: u64,
    last_from_server: Timestamp,
    /// Requests sent on the current connection and not yet answered.
    inflight: BTreeMap<OpId, Inflight>,
    paused_until: Option<Timestamp>,
    resumed_at: Timestamp,
    /// A partition: until when, and which directions it cuts.
    partition: Option<(Timestamp, Cut)>,
    /// A slow link: until when, and the extra latency.
    slow: Option<(Timestamp, Duration)>,
    link: Link,
    /// When the client library's event thread is done with the events it has.
    event_tail: Timestamp,
    /// Until when its event thread lags.
    lag_until: Option<Timestamp>,
    timer_at: Option<Timestamp>,
    session_closed: bool,
    writing: bool,
    /// The node an operator deleted (its name and czxid: a recreated
    /// container parent can give a new node the same name), and when.
    revoked: Option<(String, Option<FencingToken>, Timestamp)>,
}

/// A read-only view of one simulated process, for checkers.
#[derive(Debug, Clone, Copy)]
pub struct Process<'a> {
    /// Its index.
    pub pid: usize,
    /// Its election logic: a zkelect candidate or a foreign model.
    pub agent: &'a Agent,
    /// The zkelect candidate, if it is one.
    pub candidate: Option<&'a Candidate>,
    /// Which other library it models, if it is not zkelect.
    pub foreign: Option<Scheme>,
    /// It crashed (it does nothing any more).
    pub crashed: bool,
    /// It is paused right now.
    pub paused: bool,
    /// When its last pause ended (zero if never paused).
    pub resumed_at: Timestamp,
    /// Its client's current session.
    pub session: Option<SessionId>,
    /// Its client was closed and its session with it.
    pub session_closed: bool,
    /// Its session's negotiated timeout (the requested one before the first).
    pub session_timeout: Duration,
    /// When an operator deleted the node the process still believes is its own
    /// (`None` once it learned, or if it never happened). A foreign model never
    /// learns: its recipe does not watch its own node.
    pub revoked_at: Option<Timestamp>,
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
    /// Stale writes the fenced resource rejected.
    pub fenced_rejections: u64,
    /// Writes the fenced resource accepted.
    pub fenced_writes: u64,
    /// Nodes an operator deleted.
    pub revocations: u64,
    /// Replies a candidate no longer waited for.
    pub stale_replies: u64,
    /// Elections of foreign models (their own belief).
    pub foreign_elections: u64,
    /// Persistent look-alikes an operator created.
    pub lookalikes: u64,
    /// Look-alikes candidates skipped (`Notice::PersistentSkipped`).
    pub persistent_skipped: u64,
    /// Runs whose server granted less than the request.
    pub clamped_down: u64,
    /// Runs whose server granted more than the request.
    pub clamped_up: u64,
}

impl RunStats {
    /// Adds another run's counters to these.
    pub fn add(&mut self, other: &RunStats) {
        self.steps += other.steps;
        self.server_ops += other.server_ops;
        self.elections += other.elections;
        self.faults += other.faults;
        self.fenced_rejections += other.fenced_rejections;
        self.fenced_writes += other.fenced_writes;
        self.revocations += other.revocations;
        self.stale_replies += other.stale_replies;
        self.foreign_elections += other.foreign_elections;
        self.lookalikes += other.lookalikes;
        self.persistent_skipped += other.persistent_skipped;
        self.clamped_down += other.clamped_down;
        self.clamped_up += other.clamped_up;
    }
}

impl std::fmt::Display for RunStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} steps, {} server ops, {} elections (+{} foreign), {} faults, {} revocations, {} fenced writes accepted, {} stale writes rejected, {} stale replies, {} look-alikes ({} skips), {} runs clamped down, {} up",
            self.steps,
            self.server_ops,
            self.elections,
            self.foreign_elections,
            self.faults,
            self.revocations,
            self.fenced_writes,
            self.fenced_rejections,
            self.stale_replies,
            self.lookalikes,
            self.persistent_skipped,
            self.clamped_down,
            self.clamped_up
        )
    }
}

/// A whole simulated run.
pub struct World {
    seed: u64,
    swarm: Swarm,
    knobs: Knobs,
    rng: SimRng,
    now: Timestamp,
    seq: u64,
    queue: BTreeMap<(Timestamp, u64), Ev>,
    zk: ZkModel,
    procs: Vec<Proc>,
    server_down_until: Option<Timestamp>,
    canary: Option<Canary>,
    invariants: Vec<Box<dyn Invariant>>,
    /// A new id per server change, carried by the watch events it fires.
    cause: u64,
    resource_max: Option<FencingToken>,
    heal_at: Timestamp,
    phase: Phase,
    pub(crate) trace: Trace,
    stats: RunStats,
    violation: Option<Violation>,
    done: bool,
    narrate: bool,
    story: Vec<(Timestamp, String)>,
    /// The persistent look-alikes' names (not leaks, and no process's).
    lookalikes: Vec<String>,
}

impl World {
    /// A world for `seed` running `swarm`, optionally with canary candidates,
    /// checked by the [standard](check::standard) invariants.
    pub fn new(seed: u64, swarm: Swarm, canary: Option<Canary>, keep_trace: bool) -> Self {
        Self::with_invariants(seed, swarm, canary, keep_trace, check::standard())
    }

    /// A world checked by the given invariants only.
    pub fn with_invariants(
        seed: u64,
        swarm: Swarm,
        canary: Option<Canary>,
        keep_trace: bool,
        invariants: Vec<Box<dyn Invariant>>,
    ) -> Self {
        let heal_at = Timestamp::ZERO + swarm.chaos;
        let mut knobs = Knobs::from_seed(seed, canary);
        // Curator and kazoo compare sequences as strings, and zkelect refuses
        // a queue it shares with them once a sequence wrapped past 2^31: such
        // a queue never starts near the wrap.
        if swarm.env.interop != Scheme::Ours {
            knobs.cversion_start = 0;
        }
        let mut world = Self {
            seed,
            rng: SimRng::new(seed, 2),
            now: Timestamp::ZERO,
            seq: 0,
            queue: BTreeMap::new(),
            zk: ZkModel::new(swarm.env.server(knobs.cversion_start)),
            procs: Vec::new(),
            server_down_until: None,
            canary,
            invariants,
            cause: 0,
            resource_max: None,
            heal_at,
            phase: Phase::Chaos,
            trace: Trace::new(keep_trace),
            stats: RunStats::default(),
            violation: None,
            done: false,
            narrate: false,
            story: Vec::new(),
            lookalikes: Vec::new(),
            swarm,
            knobs,
        };
        for scheme in world.swarm.env.lookalikes.clone() {
            world.create_lookalike(scheme, true);
        }
        for _ in 0..world.swarm.candidates {
            world.spawn();
        }
        for _ in 0..world.swarm.env.foreign {
            world.spawn_foreign();
        }
        for (at, fault) in world.swarm.plan.clone() {
            world.push(at, Ev::Fault(fault));
        }
        world.push(Timestamp::from_millis(200), Ev::Expiry);
        world.push(heal_at, Ev::Heal);
        world.push(heal_at + world.liveness_bound(), Ev::LivenessDue);
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

    /// How long after the faults stop the leaders must be in place: the session
    /// of a dead process expires within one (negotiated) timeout of its last
    /// ping, a process cut off reconnects within a second of the partition's
    /// end (a partition lasts at most two requested timeouts, and may begin
    /// just before the faults stop), and a retry waits at most the backoff
    /// maximum (2 s).
    pub fn liveness_bound(&self) -> Duration {
        self.negotiated().max(self.swarm.session_timeout) * 2 + Duration::from_secs(4)
    }

    /// The session timeout the server grants the swarm's request.
    pub fn negotiated(&self) -> Duration {
        self.zk.negotiate(self.swarm.session_timeout)
    }

    /// The names of the persistent look-alikes an operator created.
    pub fn lookalikes(&self) -> &[String] {
        &self.lookalikes
    }

    // ----- read-only views, for checkers --------------------------------------

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Virtual time now.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// The phase of the run.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// When the faults stop.
    pub fn healed_at(&self) -> Timestamp {
        self.heal_at
    }

    /// The scenario.
    pub fn swarm(&self) -> &Swarm {
        &self.swarm
    }

    /// The world's settings drawn from the seed.
    pub fn knobs(&self) -> &Knobs {
        &self.knobs
    }

    /// The server.
    pub fn zk(&self) -> &ZkModel {
        &self.zk
    }

    /// The highest token the fenced resource has accepted.
    pub fn resource_max(&self) -> Option<FencingToken> {
        self.resource_max
    }

    /// One process. Panics if `pid` is out of range.
    pub fn process(&self, pid: usize) -> Process<'_> {
        let p = &self.procs[pid];
        Process {
            pid,
            agent: &p.c,
            candidate: p.c.candidate(),
            foreign: p.c.foreign(),
            crashed: p.crashed,
            paused: p.paused_until.is_some_and(|t| self.now < t),
            // A pause is over at its end even before its `Resume` event is
            // handled (another event at the same moment may come first).
            resumed_at: match p.paused_until {
                Some(t) if t <= self.now => t,
                _ => p.resumed_at,
            },
            session: p.session,
            session_closed: p.session_closed,
            session_timeout: p.timeout,
            revoked_at: p
                .revoked
                .as_ref()
                .filter(|(node, token, _)| p.c.node() == Some(node) && p.c.token() == *token)
                .map(|(_, _, at)| *at),
        }
    }

    /// The requests the process's client has sent on its current connection
    /// and not yet answered, oldest first.
    pub fn requests_in_flight(&self, pid: usize) -> impl Iterator<Item = &Request> + '_ {
        self.procs[pid].inflight.values().map(|sent| &sent.request)
    }

    /// Every process, in pid order.
    pub fn processes(&self) -> impl Iterator<Item = Process<'_>> + '_ {
        (0..self.procs.len()).map(|pid| self.process(pid))
    }

    /// The processes that believe they lead right now (crashed ones too), in
    /// pid order: what the safety checker looks at after every step, without
    /// building a view of every process.
    pub fn believed_leaders(&self) -> impl Iterator<Item = Process<'_>> + '_ {
        (0..self.procs.len())
            .filter(|&pid| self.procs[pid].c.role().is_leader())
            .map(|pid| self.process(pid))
    }

    /// The processes whose node an operator once deleted (whether or not they
    /// have learned it since), in pid order.
    pub fn once_revoked(&self) -> impl Iterator<Item = Process<'_>> + '_ {
        (0..self.procs.len())
            .filter(|&pid| self.procs[pid].revoked.is_some())
            .map(|pid| self.process(pid))
    }

    /// The election path's children right now (for tests and the demo).
    pub fn children(&self) -> Vec<String> {
        self.zk.children(PATH)
    }

    /// The run's counters.
    pub fn stats(&self) -> RunStats {
        let (requested, granted) = (self.swarm.session_timeout, self.negotiated());
        RunStats {
            server_ops: self.zk.ops(),
            clamped_down: u64::from(granted < requested),
            clamped_up: u64::from(granted > requested),
            ..self.stats
        }
    }

    // ----- the loop -------------------------------------------------------------

    /// Runs to the end; returns the violation, if any.
    pub fn run(&mut self) -> Option<Violation> {
        while !self.done && self.violation.is_none() {
            if !self.step() {
                break;
            }
        }
        self.violation.clone()
    }

    /// Runs every event due up to `at` (and moves the clock there); returns
    /// the violation, if any.
    pub fn run_until(&mut self, at: Timestamp) -> Option<Violation> {
        while !self.done && self.violation.is_none() {
            match self.queue.first_key_value() {
                Some(((next, _), _)) if *next <= at => {
                    self.step();
                }
                _ => break,
            }
        }
        self.now = self.now.max(at);
        self.violation.clone()
    }

    /// The trace so far.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The first violation, if any.
    pub fn violation(&self) -> Option<&Violation> {
        self.violation.as_ref()
    }

    /// The processes leading right now (crashed ones excluded).
    pub fn leaders(&self) -> Vec<usize> {
        self.processes()
            .filter(|p| !p.crashed && p.agent.role().is_leader())
            .map(|p| p.pid)
            .collect()
    }

    /// Handles the next event and runs the checkers; false when nothing is left.
    pub fn step(&mut self) -> bool {
        let Some(((at, _), ev)) = self.queue.pop_first() else {
            return false;
        };
        self.now = at;
        self.stats.steps += 1;
        self.deliver(ev);
        self.observe(&Event::Step);
        true
    }

    fn observe(&mut self, event: &Event<'_>) {
        let mut invariants = std::mem::take(&mut self.invariants);
        for inv in &mut invariants {
            if let Err(detail) = inv.check(self, event) {
                self.fail(inv.name(), detail);
            }
        }
        self.invariants = invariants;
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

    fn push(&mut self, at: Timestamp, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at.max(self.now), self.seq), ev);
    }

    fn latency(&mut self, pid: usize) -> Duration {
        let base = Duration::from_millis(self.rng.range(1, 8));
        match self.procs[pid].slow {
            Some((until, extra)) if self.now < until => base + extra,
            _ => base,
        }
    }

    fn identity(&self) -> Option<&'static str> {
        (self.knobs.acl != Acl::Open).then_some(IDENTITY)
    }

    fn spawn(&mut self) {
        let pid = self.procs.len();
        let mut builder = Config::builder(PATH, format!("p{pid}"))
            .leaders(self.swarm.leaders)
            .policy(self.swarm.policy)
            .acl(self.knobs.acl)
            .container_parent(self.knobs.container_parent)
            .nonce_seed(self.seed.wrapping_mul(31).wrapping_add(pid as u64))
            .backoff(Duration::from_millis(50), Duration::from_secs(2));
        builder = interop(builder, self.swarm.env.interop);
        if let Some(canary) = self.canary {
            builder = canary.configure(builder);
        }
        let config = match builder.build() {
            Ok(c) => c,
            Err(e) => return self.fail("config", format!("{e}")),
        };
        self.start(Agent::Zkelect(Box::new(Candidate::new(config))));
    }

    /// Starts a model of the swarm's foreign library (Curator when the
    /// candidates do not interoperate with either).
    fn spawn_foreign(&mut self) {
        let pid = self.procs.len();
        let id = format!("p{pid}");
        let seed = self.seed.wrapping_mul(37).wrapping_add(pid as u64);
        let agent = match self.swarm.env.interop {
            Scheme::Kazoo => Agent::Kazoo(KazooLock::new(PATH, &id, self.knobs.acl, seed)),
            Scheme::Curator | Scheme::Ours => {
                Agent::Curator(CuratorLatch::new(PATH, &id, self.knobs.acl, seed))
            }
        };
        self.start(agent);
    }

    fn start(&mut self, mut c: Agent) {
        let pid = self.procs.len();
        c.join(self.now);
        self.procs.push(Proc {
            c,
            crashed: false,
            session: None,
            timeout: self.swarm.session_timeout,
            handshaken: None,
            conn: Conn::Disconnected,
            gen: 0,
            last_from_server: self.now,
            inflight: BTreeMap::new(),
            paused_until: None,
            resumed_at: Timestamp::ZERO,
            partition: None,
            slow: None,
            link: Link::default(),
            event_tail: Timestamp::ZERO,
            lag_until: None,
            timer_at: None,
            session_closed: false,
            writing: false,
            revoked: None,
        });
        let at = self.now + Duration::from_millis(self.rng.range(0, 50));
        self.push(at, Ev::Reconnect { pid });
    }

    /// An operator creates a PERSISTENT node named like a contender of
    /// `scheme` under the election path (a sequential create, so it sorts
    /// after every node there now). Before anyone joins (`setup`) it creates
    /// the path first, as the candidates would have; later it does nothing if
    /// the path is gone.
    fn create_lookalike(&mut self, scheme: Scheme, setup: bool) {
        let stem = lookalike_stem(scheme, &mut self.rng);
        let container = self.knobs.container_parent;
        let created = self.operator(|zk, now, s| {
            let mut fired = Vec::new();
            if setup {
                for (path, mode) in [
                    ("/svc", CreateMode::Persistent),
                    (
                        PATH,
                        if container {
                            CreateMode::Container
                        } else {
                            CreateMode::Persistent
                        },
                    ),
                ] {
                    let create = Request::Create {
                        path: path.to_owned(),
                        data: Vec::new(),
                        mode,
                        acl: Acl::Open,
                    };
                    fired.extend(zk.apply(now, s, &create).1);
                }
            }
            let create = Request::Create {
                path: format!("{PATH}/{stem}"),
                data: b"not a contender".to_vec(),
                mode: CreateMode::PersistentSequential,
                acl: Acl::Open,
            };
            let (result, f) = zk.apply(now, s, &create);
            fired.extend(f);
            (result, fired)
        });
        if let Some(Ok(Reply::Created { path, .. })) = created {
            self.stats.lookalikes += 1;
            self.trace.note(
                self.now,
                None,
                'P',
                format!(
                    "operator created persistent {scheme} look-alike {}",
                    short(&path)
                ),
            );
            self.lookalikes.push(short(&path).to_owned());
        }
    }

    fn server_up(&self) -> bool {
        self.server_down_until.is_none()
    }

    /// Whether a message that got past the partition check can be handled:
    /// the process is alive and the server up.
    fn linked(&self, pid: usize) -> bool {
        !self.procs[pid].crashed && self.server_up()
    }

    /// Whether a new connection can be made: linked, and no partition in
    /// either direction (a TCP handshake needs both).
    fn reachable(&self, pid: usize) -> bool {
        self.linked(pid) && self.procs[pid].partition.is_none_or(|(t, _)| self.now >= t)
    }

    /// A message crossing a partitioned link waits for the partition to end, as
    /// TCP would retransmit it; it is lost only if the connection is declared
    /// dead meanwhile (its generation no longer matches).
    fn held_by_partition(&mut self, pid: usize, ev: &Ev) -> bool {
        let to_server = matches!(ev, Ev::Request { .. } | Ev::Ping { .. });
        match self.procs[pid].partition {
            Some((until, cut)) if self.now < until && cut.blocks(to_server) => {
                // Through the link's FIFO: whatever was sent after it waits
                // behind it, even if the partition is over by then.
                let after = until + Duration::from_millis(1);
                let link = &mut self.procs[pid].link;
                let at = if to_server {
                    link.to_server(after, Duration::ZERO)
                } else if matches!(ev, Ev::Reply { .. }) {
                    link.reply(after, Duration::ZERO, false)
                } else {
                    link.to_client(after, Duration::ZERO)
                };
                self.push(at, ev.clone());
                true
            }
            _ => false,
        }
    }

    /// Starts a partition; one already on is never cut short (a message it
    /// holds must not be overtaken), and cuts that differ add up to both ways.
    fn partition(&mut self, pid: usize, ms: u64, cut: Cut) {
        let until = self.now + Duration::from_millis(ms);
        let p = &mut self.procs[pid];
        p.partition = Some(match p.partition {
            Some((old, old_cut)) if self.now < old => {
                let cut = if old_cut == cut { cut } else { Cut::Both };
                (old.max(until), cut)
            }
            _ => (until, cut),
        });
    }

    fn deliver(&mut self, ev: Ev) {
        // A paused process handles nothing: its events wait for it, in order.
        if let Some(pid) = ev.handler() {
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
        if let Some(pid) = ev.crossing() {
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
                cause,
            } => self.on_request(pid, gen, op, request, cause),
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
                if let Some(sent) = self.procs[pid].inflight.remove(&op) {
                    self.deliver_reply(pid, op, Some(&sent.request), result);
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
                // The client library hands events to the application in order;
                // under `Fault::LagEvents` its event thread lags (replies do not
                // wait for it), as zookeeper-async's watcher channel can.
                let lagging = self.procs[pid].lag_until.is_some_and(|t| self.now < t);
                let lag = if lagging && self.rng.chance(0.5) {
                    Duration::from_millis(self.rng.range(1, EVENT_LAG_MAX_MS))
                } else {
                    Duration::ZERO
                };
                let at = (self.now + lag).max(self.procs[pid].event_tail);
                self.procs[pid].event_tail = at;
                if at > self.now {
                    self.push(at, Ev::Event { pid, event, cause });
                } else {
                    self.watch_event(pid, event, cause);
                }
            }
            Ev::Event { pid, event, cause } => self.watch_event(pid, event, cause),
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
            Ev::ReadTimeout { pid, gen } => self.read_timeout(pid, gen),
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
            Ev::Expiry => self.expire(),
            Ev::Fault(fault) => self.inject(fault),
            Ev::ServerUp => {
                self.server_down_until = None;
                self.zk.restart(self.now);
                self.trace.note(self.now, None, 'S', "server up".into());
            }
            Ev::Closed { pid, gen } => {
                if self.procs[pid].gen == gen {
                    self.disconnect(pid, "the server closed the connection");
                }
            }
            Ev::LocalFail { pid, op } => {
                self.deliver_reply(pid, op, None, Err(ZkCode::ConnectionLoss));
            }
            Ev::Resume { pid } => {
                // Overlapping pauses end with the last one.
                if self.procs[pid].paused_until.is_some_and(|t| t <= self.now) {
                    self.procs[pid].paused_until = None;
                    self.procs[pid].resumed_at = self.now;
                    self.trace.note(self.now, Some(pid), 'r', "resumed".into());
                }
            }
            Ev::AppWrite { pid } => self.app_write(pid),
            Ev::Write { pid, token } => self.resource_write(pid, token),
            Ev::Heal => {
                self.phase = Phase::Healed;
                self.trace.note(self.now, None, 'H', "faults stop".into());
            }
            Ev::LivenessDue => {
                self.phase = Phase::Settled;
                self.trace
                    .note(self.now, None, 'L', "liveness bound reached".into());
                self.observe(&Event::LivenessDue);
                self.push(self.now + SETTLE, Ev::CloseAll);
            }
            Ev::CloseAll => {
                self.phase = Phase::Closing;
                for pid in 0..self.procs.len() {
                    if !self.procs[pid].crashed {
                        self.procs[pid].c.close(self.now);
                        self.after(pid, None, "close (end of run)".into());
                    }
                }
                let t = self.negotiated();
                self.push(self.now + t * 2 + Duration::from_secs(3), Ev::End);
            }
            Ev::End => {
                self.observe(&Event::End);
                self.done = true;
            }
        }
    }

    fn expire(&mut self) {
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

    fn client_arrival(&mut self, pid: usize) -> Timestamp {
        let lat = self.latency(pid);
        self.procs[pid].link.to_client(self.now, lat)
    }

    fn server_arrival(&mut self, pid: usize) -> Timestamp {
        let lat = self.latency(pid);
        self.procs[pid].link.to_server(self.now, lat)
    }

    fn on_request(&mut self, pid: usize, gen: u64, op: OpId, request: Request, cause: Option<u64>) {
        if self.procs[pid].gen != gen || !self.linked(pid) {
            return;
        }
        let Some(session) = self.procs[pid].session else {
            return;
        };
        if let Some(entry) = self.procs[pid].inflight.get_mut(&op) {
            entry.arrived = true;
        }
        if let Some(cause) = cause {
            if matches!(
                request,
                Request::GetChildren { .. } | Request::GetData { .. }
            ) {
                self.observe(&Event::Woken { pid, cause });
            }
        }
        let (result, fired) = self.zk.apply(self.now, session, &request);
        self.send_fired(fired);
        // With reorder, a reply may overtake watch events already on their way.
        let overtake = self.swarm.reorder && self.rng.chance(0.2);
        let lat = self.latency(pid);
        let at = self.procs[pid].link.reply(self.now, lat, overtake);
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

    /// Sends fired watches to their clients. Each deleted node is a server
    /// change of its own (an expiry deletes several at once); the other events
    /// of one request share one.
    fn send_fired(&mut self, fired: Vec<Fired>) {
        if fired.is_empty() {
            return;
        }
        self.cause += 1;
        let shared = self.cause;
        let mut per_path: BTreeMap<String, u64> = BTreeMap::new();
        for f in fired {
            let cause = if f.event.kind == WatchKind::NodeDeleted {
                let next = self.cause + 1;
                let c = *per_path.entry(f.event.path.clone()).or_insert(next);
                self.cause = self.cause.max(c);
                c
            } else {
                shared
            };
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

    /// The application gets a watch event from its client library.
    fn watch_event(&mut self, pid: usize, event: WatchEvent, cause: u64) {
        let text = format!("watch {:?} {}", event.kind, short(&event.path));
        // A candidate's own-node watch is not part of a herd; nor is a
        // candidate whose node an operator deleted and which has not learned it
        // yet: it is out of the queue, but the watch it set while it was in is
        // still there. Nor are foreign models: both recipes act on watches
        // left from an earlier round (Curator lists again on any `NodeDeleted`,
        // kazoo on any event), which is theirs to answer for.
        let own = self.procs[pid]
            .c
            .node()
            .is_some_and(|n| event.path.rsplit('/').next() == Some(n));
        let revoked = self.process(pid).revoked_at.is_some();
        let foreign = self.procs[pid].c.foreign().is_some();
        let cause = (!own && !revoked && !foreign).then_some(cause);
        let mut event = event;
        if let Some(canary) = self.canary_of(pid) {
            if !canary.sees_watch(&event.path, self.procs[pid].c.node()) {
                return;
            }
            event = canary.rewrite_watch(event, self.swarm.env.interop);
        }
        self.procs[pid].c.handle(self.now, Input::Watch(event));
        self.after(pid, cause, text);
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

    /// The Java client's and kazoo's read timeout: the connection is lost
    /// exactly two thirds of the session timeout after the last message from
    /// the server (zkelect's transports are modelled coarser, checked at their
    /// pings by [`client_tick`](Self::client_tick); its own lease covers that).
    fn read_timeout(&mut self, pid: usize, gen: u64) {
        let p = &self.procs[pid];
        if p.gen != gen || p.conn != Conn::Connected {
            return;
        }
        let due = p.last_from_server + p.timeout * 2 / 3;
        if self.now >= due {
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
    fn disconnect(&mut self, pid: usize, why: &str) {
        if self.procs[pid].conn != Conn::Connected {
            return;
        }
        self.trace
            .note(self.now, Some(pid), 'd', format!("disconnected: {why}"));
        let p = &mut self.procs[pid];
        p.conn = Conn::Disconnected;
        p.gen += 1;
        let failed = std::mem::take(&mut p.inflight);
        self.session_event(pid, SessionEvent::Disconnected);
        for (op, sent) in failed {
            self.deliver_reply(pid, op, Some(&sent.request), Err(ZkCode::ConnectionLoss));
        }
        let at = self.now + Duration::from_millis(self.rng.range(100, 400));
        self.push(at, Ev::Reconnect { pid });
    }

    /// The canary, for a zkelect candidate (foreign models are never canaries).
    fn canary_of(&self, pid: usize) -> Option<Canary> {
        self.canary
            .filter(|_| self.procs[pid].c.foreign().is_none())
    }

    fn session_event(&mut self, pid: usize, event: SessionEvent) {
        if self.canary_of(pid).is_some_and(|c| !c.sees(event)) {
            return;
        }
        let text = match event {
            SessionEvent::Connected { session_id, .. } => format!(
                "session Connected {}",
                session_id.map_or("(id not reported)".to_owned(), |s| s.to_string())
            ),
            other => format!("session {other:?}"),
        };
        self.procs[pid].c.handle(self.now, Input::Session(event));
        self.after(pid, None, text);
    }

    fn reconnect(&mut self, pid: usize) {
        let p = &self.procs[pid];
        if p.conn == Conn::Connected || p.session_closed {
            return;
        }
        if !self.reachable(pid) {
            let at = self.now + Duration::from_millis(self.rng.range(200, 500));
            self.push(at, Ev::Reconnect { pid });
            return;
        }
        let identity = self.identity();
        let requested = self.swarm.session_timeout;
        // zookeeper-async (which does not report session ids either) learns
        // the timeout by a handshake of its own before its first session.
        let source = if self.knobs.session_ids {
            TimeoutSource::Session
        } else {
            TimeoutSource::Handshake
        };
        if source == TimeoutSource::Handshake && self.procs[pid].handshaken.is_none() {
            let learned = handshake(&mut self.zk, self.now, requested, identity);
            self.procs[pid].handshaken = Some(learned);
        }
        match reconnect(
            &mut self.zk,
            self.now,
            self.procs[pid].session,
            requested,
            identity,
        ) {
            Reconnected::Same(_) => {}
            Reconnected::Expired { new, timeout } => {
                // The server expired it while we were away: say so, then start afresh.
                self.procs[pid].session = None;
                self.session_event(pid, SessionEvent::Expired);
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
        let (session_id, timeout, gen) = (p.session, p.timeout, p.gen);
        // The client library's own timing follows the session's timeout; what
        // it reports is what it learned.
        self.push(self.now + timeout / 3, Ev::ClientTick { pid });
        if self.procs[pid].c.foreign().is_some() {
            self.push(self.now + timeout * 2 / 3, Ev::ReadTimeout { pid, gen });
        }
        let session_id = session_id.filter(|_| self.knobs.session_ids);
        let learned = match source {
            TimeoutSource::Session => timeout,
            TimeoutSource::Handshake => self.procs[pid].handshaken.unwrap_or(timeout),
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
    }

    fn deliver_reply(
        &mut self,
        pid: usize,
        op: OpId,
        request: Option<&Request>,
        result: Result<Reply, ZkCode>,
    ) {
        let result = match (self.canary_of(pid), request) {
            (Some(canary), Some(request)) => {
                canary.rewrite(request, result, self.swarm.env.interop)
            }
            _ => result,
        };
        let text = match &result {
            Ok(r) => format!("reply {op} {}", reply_text(r)),
            Err(e) => format!("reply {op} err {e}"),
        };
        let c = &self.procs[pid].c;
        let stale = !c.waits_for(op);
        // What the role would be at this moment without the reply.
        let role_before = if stale {
            self.stats.stale_replies += 1;
            let mut twin = c.clone();
            twin.handle_timeout(self.now);
            twin.role()
        } else {
            c.role()
        };
        self.procs[pid]
            .c
            .handle(self.now, Input::Reply { op, result });
        let role_after = self.procs[pid].c.role();
        self.observe(&Event::Answered {
            pid,
            op,
            stale,
            role_before,
            role_after,
        });
        self.after(pid, None, text);
    }

    /// Drains the candidate (notices, commands, timeout) after it handled
    /// something; `cause` is the server change whose watch event woke it.
    fn after(&mut self, pid: usize, cause: Option<u64>, text: String) {
        let notices: Vec<Notice> = std::iter::from_fn(|| self.procs[pid].c.poll_notice()).collect();
        let foreign = self.procs[pid].c.foreign();
        for n in &notices {
            match foreign {
                // A foreign model's notices are for the trace and the story:
                // its belief is read from its role, and it has no tokens.
                Some(scheme) => self.on_foreign_notice(pid, scheme, n),
                None => {
                    self.on_notice(pid, n);
                    self.observe(&Event::Notice { pid, notice: n });
                }
            }
        }
        let text = match foreign {
            Some(scheme) => format!("{scheme}: {text}"),
            None => text,
        };
        let commands: Vec<Command> =
            std::iter::from_fn(|| self.procs[pid].c.poll_command()).collect();
        let mut ops = String::new();
        for (i, cmd) in commands.iter().enumerate() {
            if i > 0 {
                ops.push(',');
            }
            let _ = write!(ops, "{}", cmd.request.verb());
        }
        let p = &self.procs[pid];
        self.trace.step(
            self.now,
            pid,
            p.c.role(),
            p.c.node(),
            p.c.watching(),
            &ops,
            &text,
            &notices,
        );
        for Command { op, request } in commands {
            self.observe(&Event::Emitted { pid, op });
            self.send(pid, op, request, cause);
        }
        if self.procs[pid].c.is_closed() && !self.procs[pid].session_closed {
            self.close_client(pid);
        }
        let next = self.procs[pid].c.poll_timeout();
        if next.is_some() && next != self.procs[pid].timer_at {
            self.procs[pid].timer_at = next;
            if let Some(at) = next {
                self.push(at, Ev::Timer { pid });
            }
        }
    }

    /// The application closed the candidate and then its client: the session
    /// ends on the server (its ephemerals go), and requests still in flight are
    /// answered with `ConnectionLoss` by the client library.
    fn close_client(&mut self, pid: usize) {
        let p = &mut self.procs[pid];
        p.session_closed = true;
        p.conn = Conn::Disconnected;
        p.gen += 1;
        let pending: Vec<OpId> = std::mem::take(&mut p.inflight).into_keys().collect();
        if let Some(s) = p.session.take() {
            if self.server_up() {
                let fired = self.zk.close_session(s);
                self.send_fired(fired);
            }
            // With the server down, the session expires on its own later.
        }
        for op in pending {
            self.push(self.now, Ev::LocalFail { pid, op });
        }
    }

    fn send(&mut self, pid: usize, op: OpId, request: Request, cause: Option<u64>) {
        let request = match self.canary_of(pid) {
            Some(canary) => canary.rewrite_request(request),
            None => request,
        };
        if self.procs[pid].conn != Conn::Connected || self.procs[pid].session_closed {
            // A client that is not connected fails the request at once (as an event,
            // so a candidate that retries at once cannot recurse without end).
            return self.push(self.now, Ev::LocalFail { pid, op });
        }
        let gen = self.procs[pid].gen;
        self.procs[pid].inflight.insert(
            op,
            Inflight {
                request: request.clone(),
                arrived: false,
            },
        );
        let at = self.server_arrival(pid);
        self.push(
            at,
            Ev::Request {
                pid,
                gen,
                op,
                request,
                cause,
            },
        );
    }

    fn on_foreign_notice(&mut self, pid: usize, scheme: Scheme, notice: &Notice) {
        match notice {
            Notice::Elected { .. } => {
                self.stats.foreign_elections += 1;
                self.tell(format!("p{pid} ({scheme}) believes it leads"));
            }
            Notice::Demoted { reason } => {
                self.tell(format!("p{pid} ({scheme}) stops leading: {reason}"));
            }
            _ => {}
        }
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
                Notice::LeaderChanged { .. } | Notice::Participants(_) => None,
                Notice::PersistentSkipped { node } => Some(format!(
                    "p{pid} skips {}: a persistent node is no contender",
                    short(node)
                )),
                Notice::Error(e) => Some(format!("p{pid} failed: {e}")),
            };
            if let Some(line) = line {
                self.tell(line);
            }
        }
        if let Notice::PersistentSkipped { .. } = notice {
            self.stats.persistent_skipped += 1;
        }
        if let Notice::Elected { .. } = notice {
            self.stats.elections += 1;
            // The new leader's application starts writing to the fenced resource.
            if self.swarm.leaders == 1 && !self.procs[pid].writing {
                self.procs[pid].writing = true;
                self.push(self.now, Ev::AppWrite { pid });
            }
        }
    }

    /// The leader's application: checks its role and, if it leads, writes with
    /// its token. The write takes a while to land, and lands late if the
    /// process is paused meanwhile — the freeze between check and write that
    /// fencing tokens exist for.
    fn app_write(&mut self, pid: usize) {
        let Role::Leader(token) = self.procs[pid].c.role() else {
            self.procs[pid].writing = false;
            return;
        };
        let lands = self.now + Duration::from_millis(self.rng.range(1, 30));
        self.push(lands, Ev::Write { pid, token });
        let next = self.now + Duration::from_millis(self.rng.range(50, 250));
        self.push(next, Ev::AppWrite { pid });
    }

    fn resource_write(&mut self, pid: usize, token: FencingToken) {
        let accepted = self.resource_max.is_none_or(|m| token >= m);
        if accepted {
            self.resource_max = Some(token);
            self.stats.fenced_writes += 1;
        } else {
            self.stats.fenced_rejections += 1;
            self.trace.note(
                self.now,
                Some(pid),
                'w',
                format!(
                    "fenced resource rejects token {token} (has seen {})",
                    self.resource_max.map_or(0, |t| t.0)
                ),
            );
        }
        self.observe(&Event::Write {
            pid,
            token,
            accepted,
        });
    }

    /// An operator's one-off session (zkCli): opened, used, closed.
    fn operator<T>(
        &mut self,
        act: impl FnOnce(&mut ZkModel, Timestamp, SessionId) -> (T, Vec<Fired>),
    ) -> Option<T> {
        if !self.server_up() {
            return None;
        }
        let identity = self.identity().map(str::to_owned);
        let (s, _) = self
            .zk
            .open_session(self.now, Duration::from_secs(10), identity);
        let (out, fired) = act(&mut self.zk, self.now, s);
        self.send_fired(fired);
        let fired = self.zk.close_session(s);
        self.send_fired(fired);
        Some(out)
    }

    /// Injects a fault (or an application intent) now, as the plan would;
    /// ignored once the faults have stopped. For hand-written scenarios.
    pub fn inject(&mut self, fault: Fault) {
        if self.phase != Phase::Chaos {
            return;
        }
        let valid = |pid: usize, w: &Self| pid < w.procs.len() && !w.procs[pid].crashed;
        let awake = |pid: usize, w: &Self| valid(pid, w) && w.procs[pid].paused_until.is_none();
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
            Fault::Revoke { pid } => Some(format!("an operator deletes p{pid}'s node")),
            Fault::WipeElection => Some("an operator deletes the whole election".to_owned()),
            Fault::SpawnForeign => Some(format!(
                "a new {} contender p{} starts",
                self.swarm.env.interop,
                self.procs.len()
            )),
            Fault::Lookalike { scheme } => Some(format!(
                "an operator creates a persistent node named like a {scheme} contender"
            )),
            _ => None,
        };
        if let Some(line) = told {
            self.tell(line);
        }
        match fault {
            Fault::DropConnection { pid, applied } if valid(pid, self) => {
                self.drop_connection(pid, applied);
            }
            Fault::Partition { pid, ms } if valid(pid, self) => {
                self.partition(pid, ms, Cut::Both);
            }
            Fault::PartitionOneWay { pid, ms, to_server } if valid(pid, self) => {
                let cut = if to_server {
                    Cut::ToServer
                } else {
                    Cut::ToClient
                };
                self.partition(pid, ms, cut);
            }
            Fault::Pause { pid, ms } if valid(pid, self) => {
                let until = self.now + Duration::from_millis(ms);
                let p = &mut self.procs[pid];
                p.paused_until = Some(p.paused_until.map_or(until, |t| t.max(until)));
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
            Fault::Resign { pid, rejoin } if awake(pid, self) => {
                self.procs[pid].c.resign(self.now, rejoin);
                self.after(pid, None, format!("resign rejoin={rejoin}"));
            }
            Fault::Close { pid } if awake(pid, self) => {
                self.procs[pid].c.close(self.now);
                self.after(pid, None, "close".into());
            }
            Fault::Spawn => self.spawn(),
            Fault::SpawnForeign => self.spawn_foreign(),
            Fault::Lookalike { scheme } => self.create_lookalike(scheme, false),
            Fault::Revoke { pid } if valid(pid, self) => self.revoke(pid),
            Fault::LagEvents { pid, ms } if valid(pid, self) => {
                let until = self.now + Duration::from_millis(ms);
                let p = &mut self.procs[pid];
                p.lag_until = Some(p.lag_until.map_or(until, |t| t.max(until)));
            }
            Fault::WipeElection => self.wipe(),
            Fault::TouchData { pid } if valid(pid, self) => self.touch_data(pid),
            Fault::Delay { pid, ms, extra_ms } if valid(pid, self) => {
                let until = self.now + Duration::from_millis(ms);
                self.procs[pid].slow = Some((until, Duration::from_millis(extra_ms)));
            }
            Fault::CrashLeader
            | Fault::PartitionLeader { .. }
            | Fault::CloseLeader
            | Fault::PauseLeader { .. }
            | Fault::RevokeLeader => {
                let leader = (0..self.procs.len()).find(|&i| {
                    let p = &self.procs[i];
                    !p.crashed && p.paused_until.is_none() && p.c.role().is_leader()
                });
                if let Some(pid) = leader {
                    let targeted = match fault {
                        Fault::CrashLeader => Fault::Crash { pid },
                        Fault::PartitionLeader { ms } => Fault::Partition { pid, ms },
                        Fault::PauseLeader { ms } => Fault::Pause { pid, ms },
                        Fault::RevokeLeader => Fault::Revoke { pid },
                        _ => Fault::Close { pid },
                    };
                    self.inject(targeted);
                }
            }
            _ => {}
        }
    }

    /// The connection drops. With `applied`, a prefix (at least one) of the
    /// requests still on their way reaches the server anyway; their replies are
    /// lost. The server sees the connection go, and its watches with it.
    fn drop_connection(&mut self, pid: usize, applied: bool) {
        if let (true, Some(s)) = (self.server_up(), self.procs[pid].session) {
            if self.procs[pid].conn == Conn::Connected {
                let pending: Vec<Request> = self.procs[pid]
                    .inflight
                    .values()
                    .filter(|sent| !sent.arrived)
                    .map(|sent| sent.request.clone())
                    .collect();
                let n = if applied && !pending.is_empty() {
                    self.rng.range(1, pending.len() as u64) as usize
                } else {
                    0
                };
                for request in pending.into_iter().take(n) {
                    let (_, fired) = self.zk.apply(self.now, s, &request);
                    self.send_fired(fired);
                }
                self.zk.connection_closed(s);
            }
        }
        self.disconnect(pid, "connection dropped");
    }

    /// An operator deletes the node the process believes is its own.
    fn revoke(&mut self, pid: usize) {
        let Some(node) = self.procs[pid].c.node().map(str::to_owned) else {
            return;
        };
        let token = match self.procs[pid].c.role() {
            Role::Leader(t) => Some(t),
            _ => None,
        };
        let path = format!("{PATH}/{node}");
        let deleted = self.operator(|zk, now, s| {
            zk.apply(
                now,
                s,
                &Request::Delete {
                    path: path.clone(),
                    version: None,
                },
            )
        });
        if let Some(Ok(_)) = deleted {
            self.stats.revocations += 1;
            let own = self.procs[pid].c.token();
            self.procs[pid].revoked = Some((node, own, self.now));
            self.trace.note(
                self.now,
                Some(pid),
                'R',
                format!("operator deleted {}", short(&path)),
            );
            self.observe(&Event::Revoked { pid, token });
        }
    }

    /// An operator deletes the whole election (`deleteall`): every child, then
    /// the path itself. Every candidate with a node there is revoked.
    fn wipe(&mut self) {
        let children = self.zk.children(PATH);
        let owners: Vec<(String, Option<usize>)> = children
            .into_iter()
            .map(|name| {
                let stat = self.zk.stat(&format!("{PATH}/{name}"));
                let owner = stat.and_then(|stat| self.owner(&name, stat));
                (name, owner)
            })
            .collect();
        let mut deleted = Vec::new();
        let done = self.operator(|zk, now, s| {
            let mut fired = Vec::new();
            for (name, owner) in &owners {
                let path = format!("{PATH}/{name}");
                let (r, f) = zk.apply(
                    now,
                    s,
                    &Request::Delete {
                        path,
                        version: None,
                    },
                );
                if r.is_ok() {
                    deleted.push((name.clone(), *owner));
                }
                fired.extend(f);
            }
            let (_, f) = zk.apply(
                now,
                s,
                &Request::Delete {
                    path: PATH.to_owned(),
                    version: None,
                },
            );
            fired.extend(f);
            ((), fired)
        });
        if done.is_none() {
            return;
        }
        self.trace.note(
            self.now,
            None,
            'R',
            format!("operator deleted the election ({} nodes)", deleted.len()),
        );
        for (node, owner) in deleted {
            self.stats.revocations += 1;
            let Some(pid) = owner else { continue };
            let token = match self.procs[pid].c.role() {
                Role::Leader(t) => Some(t),
                _ => None,
            };
            let own = self.procs[pid].c.token();
            self.procs[pid].revoked = Some((node, own, self.now));
            self.observe(&Event::Revoked { pid, token });
        }
    }

    /// The live process whose own node this is: a zkelect candidate knows
    /// its node's czxid (a recreated parent can give a new node an old name);
    /// a foreign model's is the one its session owns.
    fn owner(&self, name: &str, stat: Stat) -> Option<usize> {
        self.procs.iter().position(|p| {
            !p.crashed
                && p.c.node() == Some(name)
                && match p.c.foreign() {
                    None => p.c.token() == Some(FencingToken(stat.czxid)),
                    Some(_) => p.session == Some(SessionId(stat.ephemeral_owner)),
                }
        })
    }

    /// An operator sets the data of the process's node.
    fn touch_data(&mut self, pid: usize) {
        let Some(node) = self.procs[pid].c.node().map(str::to_owned) else {
            return;
        };
        let path = format!("{PATH}/{node}");
        self.operator(|zk, now, s| zk.set_data(now, s, &path, b"touched", None));
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
        Reply::Data { stat, .. } => format!("data czxid={} v{}", stat.czxid, stat.version),
        Reply::Exists(s) => format!("exists={}", s.is_some()),
        Reply::Deleted => "deleted".into(),
        Reply::Set(stat) => format!("set version={}", stat.version),
    }
}

/// Sets the candidates' interop scheme.
fn interop(builder: ConfigBuilder, scheme: Scheme) -> ConfigBuilder {
    builder.interop(scheme.interop())
}
