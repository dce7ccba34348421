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
//! See [`crate::client`]: pings and the silence check of the library the
//! process runs ([`Library`](crate::client::Library): zookeeper-client or
//! zookeeper-async for a zkelect candidate, by the seed's `session_ids` knob;
//! the Java client or kazoo for a foreign model), reconnect, `Expired` learned on
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
use std::rc::Rc;
use std::time::Duration;

use zkelect_core::name::Access;
use zkelect_core::{
    Candidate, Command, Config, ConfigBuilder, FencingToken, Notice, OpId, Recipe, Reply, Request,
    Role, SessionId, Timestamp, WatchEvent, WatchKind, ZkCode,
};

use crate::canary::Canary;
use crate::choice::Choices;
use crate::client::Pace;
use crate::foreign::{Agent, CuratorLatch, KazooLock, Scheme};
pub use crate::invariant::Violation;
use crate::invariant::{Event, Holds, Invariant, Kinds};
use crate::net::{Arrival, Net, Way};
use crate::queue::EventQueue;
use crate::server::Server;
use crate::swarm::{ChrootRoot, Fault, Knobs, Queue, SideQueue, Swarm};
use crate::trace::Trace;
use crate::zk::{Fired, ZkModel};

mod census;
mod client;
mod faults;
mod hosting;

pub use hosting::Planted;
use hosting::{Armed, Arming};

pub use census::Census;

/// The election path every simulated candidate uses.
pub const PATH: &str = "/svc/leader";

/// One queue of the world (issue 17: many recipes on one session): queue 0
/// is the swarm's own ([`PATH`], [`Swarm::recipe`], its interop scheme, its
/// foreign models and look-alikes); the others are its
/// [`SideQueue`]s, on paths of their own, their candidates naming their
/// nodes in zkelect's own scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    /// Its path.
    pub path: String,
    /// Its recipe as the swarm draws it.
    pub queue: Queue,
    /// Its k (1 for a mutex or a read-write lock).
    pub leaders: u32,
    /// The naming scheme of its candidates.
    pub scheme: Scheme,
}

impl QueueSpec {
    /// The core's recipe.
    pub fn recipe(&self) -> Recipe {
        self.queue.recipe(self.leaders)
    }
}

pub use crate::swarm::IDENTITY;

/// The longest a client library's event thread lags behind its replies
/// (under [`Fault::LagEvents`]).
pub const EVENT_LAG_MAX_MS: u64 = 60;

/// How long the leaders must stay in place after the liveness bound, before the
/// candidates are closed.
pub const SETTLE: Duration = Duration::from_secs(2);

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

/// An event of the world. Its payloads (a request, a reply) live behind a
/// pointer, so an event is small: a step moves it from the queue's slab to
/// its handler a few times, and at 112 bytes those moves were a few percent
/// of a run. Its kind is a plain tag byte (not folded into a niche of a
/// field), which every step reads several times.
#[derive(Debug, Clone)]
#[repr(u8)]
enum Ev {
    /// A request reaches the server; `cause` is the server change whose watch
    /// event made the candidate send it, if it was sent on waking. The client
    /// keeps the same request among those in flight.
    Request {
        pid: usize,
        gen: u64,
        op: OpId,
        request: Rc<Request>,
        cause: Option<u64>,
    },
    /// A reply reaches the client.
    Reply {
        pid: usize,
        gen: u64,
        op: OpId,
        result: Box<Result<Reply, ZkCode>>,
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
    /// The client library's timer: pings and the silence check (only the
    /// one the process last asked for counts, see `Proc::tick_at`).
    ClientTick { pid: usize, gen: u64, at: Timestamp },
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
    /// A message its link held (a partition, a paused receiver, or a message
    /// sent before it still held), offered again (see [`Net::verdict`]).
    Held(Box<Ev>),
    /// The server closed the connection (it expired the session, or restarted).
    Closed { pid: usize, gen: u64 },
    /// The client library fails a request locally (not connected, or closed).
    LocalFail { pid: usize, op: OpId },
    /// A canary's client answers a request itself ([`Canary::answers_locally`]).
    LocalReply {
        pid: usize,
        op: OpId,
        result: Box<Result<Reply, ZkCode>>,
    },
    /// A leader's application checks its role and, if leading, writes.
    AppWrite { pid: usize },
    /// A write reaches the fenced resource.
    Write { pid: usize, token: FencingToken },
    /// The faults stop.
    Heal,
    /// The liveness bound has passed.
    LivenessDue,
    /// The world has been quiet for a while (the end of the settled
    /// phase, just before the candidates close): observers are checked.
    Quiet,
    /// Close every candidate.
    CloseAll,
    /// The end: leak check and the last checks.
    End,
}

// Kept small: see `Ev`.
const _: () = assert!(size_of::<Ev>() <= 64);

impl Ev {
    /// The process that handles this event (and so waits while it is paused,
    /// and never handles it if it crashed).
    fn handler(&self) -> Option<usize> {
        match self {
            Self::Reply { pid, .. }
            | Self::Watch { pid, .. }
            | Self::Pong { pid, .. }
            | Self::ClientTick { pid, .. }
            | Self::ReadTimeout { pid, .. }
            | Self::Reconnect { pid }
            | Self::Timer { pid }
            | Self::LocalFail { pid, .. }
            | Self::LocalReply { pid, .. }
            | Self::Closed { pid, .. }
            | Self::Event { pid, .. }
            | Self::AppWrite { pid }
            | Self::Write { pid, .. } => Some(*pid),
            _ => None,
        }
    }

    /// The process whose network link this message crosses, and which way
    /// (a held reply keeps its place behind earlier watch events).
    fn crossing(&self) -> Option<(usize, Way)> {
        match self {
            Self::Request { pid, .. } | Self::Ping { pid, .. } => Some((*pid, Way::ToServer)),
            Self::Reply { pid, .. } => Some((*pid, Way::Reply { overtake: false })),
            Self::Watch { pid, .. } | Self::Pong { pid, .. } | Self::Closed { pid, .. } => {
                Some((*pid, Way::ToClient))
            }
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    Connected,
    Disconnected,
}

/// A client's requests in flight by their op on the wire, in op order: a
/// map over a sorted vector (a client has a handful at a time, and a
/// `BTreeMap`'s node work was a percent of a run).
#[derive(Debug, Clone, Default)]
struct InflightTable(Vec<(OpId, Inflight)>);

impl InflightTable {
    fn insert(&mut self, op: OpId, sent: Inflight) {
        match self.0.binary_search_by_key(&op, |(o, _)| *o) {
            Ok(i) => self.0[i].1 = sent,
            Err(i) => self.0.insert(i, (op, sent)),
        }
    }

    fn remove(&mut self, op: &OpId) -> Option<Inflight> {
        let i = self.0.binary_search_by_key(op, |(o, _)| *o).ok()?;
        Some(self.0.remove(i).1)
    }

    fn get_mut(&mut self, op: &OpId) -> Option<&mut Inflight> {
        let i = self.0.binary_search_by_key(op, |(o, _)| *o).ok()?;
        self.0.get_mut(i).map(|(_, sent)| sent)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn values(&self) -> impl Iterator<Item = &Inflight> + '_ {
        self.0.iter().map(|(_, sent)| sent)
    }

    fn into_values(self) -> impl Iterator<Item = Inflight> {
        self.0.into_iter().map(|(_, sent)| sent)
    }
}

#[derive(Debug, Clone)]
struct Inflight {
    request: Rc<Request>,
    /// The server has it.
    arrived: bool,
    /// The machine that sent it, and under which of its own ids (the wire
    /// id is the session's, see `hosting::wire`).
    pid: usize,
    op: OpId,
    /// The watch it arms, if any.
    arms: Option<Armed>,
}

/// One machine, and — on the machine that hosts its session — the client
/// library and session: the connection fields below are read on the host
/// only (`host == pid`); a rider's stay at their defaults.
#[derive(Debug, Clone)]
struct Proc {
    c: Agent,
    /// The machine whose client and session this one runs on (itself,
    /// unless it rides on another's session).
    host: usize,
    /// The queue it is a machine of (an index into `World::queues`).
    queue: usize,
    /// On a host: the machines on its session (itself first), in pid order.
    machines: Vec<usize>,
    /// On a host: per watched path and watch table, the machines armed since
    /// it last fired, each with its arming requests still unanswered (the
    /// driver's table: the server keeps one watch per session, path and kind).
    watches: BTreeMap<Armed, BTreeMap<usize, Arming>>,
    crashed: bool,
    session: Option<SessionId>,
    timeout: Duration,
    /// The timeout the client learned by its own handshake (zookeeper-async).
    handshaken: Option<Duration>,
    /// When its start-up (against an ensemble) made its plan.
    started: Option<Timestamp>,
    conn: Conn,
    gen: u64,
    last_from_server: Timestamp,
    /// The last message sent on the current connection (request or ping).
    last_to_server: Timestamp,
    /// When the current connection was made (zookeeper-client's ticks count from it).
    connected_at: Timestamp,
    /// A ping is unanswered on the current connection.
    ping_out: bool,
    /// The client library's next timer moment, if one is set.
    tick_at: Option<Timestamp>,
    /// Requests sent on the current connection and not yet answered.
    inflight: InflightTable,
    paused_until: Option<Timestamp>,
    resumed_at: Timestamp,
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
    /// It is an observer (no node; never a contender).
    pub observer: bool,
    /// The queue it is a machine of ([`World::queues`]; 0 is the swarm's).
    pub queue: usize,
    /// The machine whose session it runs on (itself unless it rides on
    /// another's; crashes, pauses and the session are that one's).
    pub host: usize,
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
    /// Observers' participant lists compared with the server's queue once
    /// the world was quiet.
    pub observer_checks: u64,
    /// Watch events one session handed to more than one machine (the
    /// server's one watch per session, path and kind, shared).
    pub shared_watches: u64,
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
        self.observer_checks += other.observer_checks;
        self.shared_watches += other.shared_watches;
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

/// The world's checkers, with per event kind ([`Kinds::index`]) the ones
/// that judge it ([`Invariant::kinds`]), in their order.
struct Judges {
    invariants: Vec<Box<dyn Invariant<World>>>,
    by_kind: Vec<Vec<usize>>,
    /// Per checker, the key under which its last pass of a step holds
    /// ([`Holds::UntilChange`], [`Holds::UntilCountsChange`]).
    held: Vec<Option<Held>>,
    /// The step key under which every step checker's pass holds: until it
    /// changes, a step asks none of them.
    all_held: Option<StepKey>,
    /// The counts under which every step checker's pass holds (each said
    /// [`Holds::UntilCountsChange`]): until they change, a step asks none.
    counts_held: Option<CountsKey>,
}

/// Under which key a checker's pass of a step holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// [`Holds::UntilChange`].
    Step(StepKey),
    /// [`Holds::UntilCountsChange`].
    Counts(CountsKey),
}

/// What a pass that said [`Holds::UntilCountsChange`] may read: the census
/// counts (their version changes whenever a process's share does), the
/// phase and the number of processes. It changes only when the step key
/// does, so a pass under the step key holds under these too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CountsKey {
    counts: u64,
    phase: Phase,
    procs: usize,
}

/// What a checker's pass of a step may read that a step can change
/// ([`Invariant::check_step`]): while none of it changes, a pass that said
/// [`Holds::UntilChange`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StepKey {
    generation: u64,
    zxid: i64,
    phase: Phase,
    procs: usize,
}

/// A whole simulated run.
pub struct World {
    seed: u64,
    swarm: Swarm,
    knobs: Knobs,
    rng: Choices,
    now: Timestamp,
    queue: EventQueue<Ev>,
    zk: Server,
    procs: Vec<Proc>,
    /// The queues: the swarm's, then its side queues.
    queues: Vec<QueueSpec>,
    /// The next machine started goes to this queue.
    joining: usize,
    /// The pids whose node an operator once deleted, ascending (checked after
    /// every step: kept, not searched for).
    revoked: Vec<usize>,
    /// Every process's link to the server.
    net: Net,
    server_down_until: Option<Timestamp>,
    canary: Option<Canary>,
    /// The checkers; out of the world while they judge it (they read it),
    /// so one pointer moves per judged event.
    judges: Option<Box<Judges>>,
    /// A machine's commands and their verbs after a step, kept between
    /// steps so draining a machine allocates nothing ([`World::after`]).
    commands: Vec<Command>,
    verbs: Vec<&'static str>,
    /// A new id per server change, carried by the watch events it fires.
    cause: u64,
    /// Per queue, the highest token its fenced resource accepted (each
    /// queue guards a resource of its own).
    resource_max: Vec<Option<FencingToken>>,
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
    /// Those of the side queues, as whole paths.
    side_lookalikes: Vec<String>,
    /// Server change → how many followers its watch events may wake (the
    /// rule's bound, see [`World::herd_bound`]).
    herd: BTreeMap<u64, usize>,
    /// A bug planted in the world's client for a test ([`Planted`]).
    planted: Option<Planted>,
    /// The operator's session that holds the ephemeral chroot
    /// ([`ChrootRoot::Ephemeral`]) for the whole run.
    keeper: Option<SessionId>,
    /// The checkers' counts ([`World::census`]), per queue
    /// ([`World::queue_census`]), and each process's share.
    census: Census,
    queue_census: Vec<Census>,
    shares: Vec<Census>,
    /// Counts recounts ([`World::generation`]).
    generation: u64,
    /// Counts recounts that changed a process's share (a version of the
    /// census counts, for [`Holds::UntilCountsChange`]).
    counts_version: u64,
    /// The client libraries' timing for the last session timeout asked
    /// (the processes of a run mostly share one).
    pace: Option<Pace>,
}

impl World {
    /// A world for `seed` running `swarm`, optionally with canary candidates,
    /// checked by the given invariants only ([`World::new`], in
    /// [`crate::run`], uses the [standard](crate::check::standard) ones).
    pub fn with_invariants(
        seed: u64,
        swarm: Swarm,
        canary: Option<Canary>,
        keep_trace: bool,
        invariants: Vec<Box<dyn Invariant<World>>>,
    ) -> Self {
        Self::with_choices(
            seed,
            swarm,
            canary,
            keep_trace,
            invariants,
            Choices::seeded(seed),
        )
    }

    /// A world whose nondeterministic choices (latencies, reorderings, how
    /// much of a dropped connection's traffic lands) come from `choices`: the
    /// seed's stream, a fuzzer's bytes or a search's script.
    pub fn with_choices(
        seed: u64,
        swarm: Swarm,
        canary: Option<Canary>,
        keep_trace: bool,
        invariants: Vec<Box<dyn Invariant<World>>>,
        choices: Choices,
    ) -> Self {
        let heal_at = Timestamp::ZERO + swarm.chaos;
        let mut knobs = Knobs::from_seed(seed, canary.is_some_and(Canary::wants_wrap));
        // Curator and kazoo compare sequences as strings, and zkelect refuses
        // a queue it shares with them once a sequence wrapped past 2^31: such
        // a queue never starts near the wrap.
        if swarm.env.interop != Scheme::Ours {
            knobs.cversion_start = 0;
        }
        if canary.is_some() {
            knobs.options = crate::swarm::Options::default();
        }
        let by_kind = Kinds::each()
            .map(|kind| {
                (0..invariants.len())
                    .filter(|&i| invariants[i].kinds().contains(kind))
                    .collect()
            })
            .collect();
        let mut queues = vec![QueueSpec {
            path: PATH.to_owned(),
            queue: swarm.env.queue,
            leaders: swarm.leaders,
            scheme: swarm.env.interop,
        }];
        for (i, side) in swarm.env.hosting.queues.iter().enumerate() {
            queues.push(QueueSpec {
                path: SideQueue::path(i + 1),
                queue: side.queue,
                leaders: side.leaders,
                scheme: Scheme::Ours,
            });
        }
        let mut world = Self {
            seed,
            rng: choices,
            now: Timestamp::ZERO,
            queue: EventQueue::default(),
            zk: Server::new(
                swarm.env.server(knobs.cversion_start),
                swarm.env.ensemble.as_ref(),
            ),
            procs: Vec::new(),
            resource_max: vec![None; queues.len()],
            queue_census: vec![Census::default(); queues.len()],
            queues,
            joining: 0,
            revoked: Vec::new(),
            net: Net::default(),
            server_down_until: None,
            canary,
            judges: Some(Box::new(Judges {
                held: vec![None; invariants.len()],
                all_held: None,
                counts_held: None,
                invariants,
                by_kind,
            })),
            cause: 0,
            commands: Vec::new(),
            verbs: Vec::new(),
            heal_at,
            phase: Phase::Chaos,
            trace: Trace::new(keep_trace),
            stats: RunStats::default(),
            violation: None,
            done: false,
            narrate: false,
            story: Vec::new(),
            lookalikes: Vec::new(),
            side_lookalikes: Vec::new(),
            herd: BTreeMap::new(),
            planted: None,
            keeper: None,
            census: Census::default(),
            shares: Vec::new(),
            generation: 0,
            counts_version: 0,
            pace: None,
            swarm,
            knobs,
        };
        if !world.knobs.options.create_parents {
            for q in 0..world.queues.len() {
                world.create_path(q);
            }
        }
        if world
            .swarm
            .env
            .chroot
            .as_ref()
            .is_some_and(|bad| bad.root == ChrootRoot::Ephemeral)
        {
            world.hold_ephemeral_chroot();
        }
        for scheme in world.swarm.env.lookalikes.clone() {
            world.create_lookalike(scheme, true);
        }
        for _ in 0..world.swarm.candidates {
            world.spawn();
        }
        for _ in 0..world.swarm.env.foreign {
            world.spawn_foreign();
        }
        for on in world.swarm.env.hosting.observers.clone() {
            world.spawn_observer(on);
        }
        for (i, side) in world
            .swarm
            .env
            .hosting
            .queues
            .clone()
            .into_iter()
            .enumerate()
        {
            world.joining = i + 1;
            for m in side.machines {
                match m.observer {
                    true => world.spawn_observer(m.on),
                    false => world.spawn_on(m.on),
                }
            }
        }
        world.joining = 0;
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
    /// maximum (2 s; longer when the seed draws a longer one).
    pub fn liveness_bound(&self) -> Duration {
        let backoff = self
            .knobs
            .options
            .backoff_max()
            .saturating_sub(Duration::from_secs(2));
        self.negotiated().max(self.swarm.session_timeout) * 2 + Duration::from_secs(4) + backoff
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
        self.zk.zk()
    }

    /// The server or ensemble (which member each session is on, the
    /// clients' view of it).
    pub fn server(&self) -> &Server {
        &self.zk
    }

    /// The highest token the fenced resource of the swarm's queue has
    /// accepted.
    pub fn resource_max(&self) -> Option<FencingToken> {
        self.resource_max[0]
    }

    /// The queues: the swarm's (0), then its side queues.
    pub fn queues(&self) -> &[QueueSpec] {
        &self.queues
    }

    /// Queue `q`'s k.
    pub fn leaders_of(&self, q: usize) -> u32 {
        self.queues[q].leaders
    }

    /// Queue `q`'s recipe.
    pub fn recipe_of(&self, q: usize) -> Recipe {
        self.queues[q].recipe()
    }

    /// The queue whose path `path` is, or a node of which it names.
    pub fn queue_of_path(&self, path: &str) -> Option<usize> {
        let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
        self.queues
            .iter()
            .position(|q| q.path == path || q.path == parent)
    }

    fn path_of(&self, pid: usize) -> &str {
        &self.queues[self.procs[pid].queue].path
    }

    /// One process. Panics if `pid` is out of range.
    pub fn process(&self, pid: usize) -> Process<'_> {
        let p = &self.procs[pid];
        let h = &self.procs[p.host];
        Process {
            pid,
            agent: &p.c,
            candidate: p.c.candidate(),
            foreign: p.c.foreign(),
            observer: p.c.observer().is_some(),
            queue: p.queue,
            host: p.host,
            crashed: h.crashed,
            paused: h.paused_until.is_some_and(|t| self.now < t),
            // A pause is over at its end even before its `Resume` event is
            // handled (another event at the same moment may come first).
            resumed_at: match h.paused_until {
                Some(t) if t <= self.now => t,
                _ => h.resumed_at,
            },
            session: h.session,
            session_closed: h.session_closed,
            session_timeout: h.timeout,
            revoked_at: self.revoked_at(pid),
        }
    }

    /// When an operator deleted process `pid`'s current node, if one did
    /// ([`Process::revoked_at`]).
    fn revoked_at(&self, pid: usize) -> Option<Timestamp> {
        let p = &self.procs[pid];
        p.revoked
            .as_ref()
            .filter(|(node, token, _)| p.c.node() == Some(node) && p.c.token() == *token)
            .map(|(_, _, at)| *at)
    }

    /// The requests the process's client has sent on its current connection
    /// and not yet answered, oldest first.
    pub fn requests_in_flight(&self, pid: usize) -> impl Iterator<Item = &Request> + '_ {
        self.procs[self.procs[pid].host]
            .inflight
            .values()
            .filter(move |sent| sent.pid == pid)
            .map(|sent| &*sent.request)
    }

    /// What the bad chroot of process `pid`'s session names, if its connect
    /// string has one ([`BadChroot`](crate::swarm::BadChroot)).
    pub fn bad_chroot(&self, pid: usize) -> Option<ChrootRoot> {
        let h = self.procs.get(pid)?.host;
        let bad = self.swarm.env.chroot.as_ref()?;
        bad.hosts.binary_search(&h).is_ok().then_some(bad.root)
    }

    /// Every process, in pid order.
    pub fn processes(&self) -> impl ExactSizeIterator<Item = Process<'_>> + '_ {
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
        self.revoked.iter().map(|&pid| self.process(pid))
    }

    /// The zkelect candidates whose node an operator once deleted and which
    /// lead right now, in pid order (what [`Revocation`](crate::check::Revocation)
    /// looks at after every step, without building a view of the others).
    pub fn revoked_leaders(&self) -> impl Iterator<Item = Process<'_>> + '_ {
        self.revoked
            .iter()
            .filter(|&&pid| {
                let p = &self.procs[pid];
                p.c.foreign().is_none() && p.c.role().is_leader()
            })
            .map(|&pid| self.process(pid))
    }

    /// The queue as the server has it now: its live (ephemeral) nodes in
    /// queue order, each with its czxid (the token it holds with) and
    /// whether the recipe says it holds — what an observer must report once
    /// the world is quiet.
    pub fn queue_truth(&self) -> Vec<(String, FencingToken, bool)> {
        self.queue_truth_of(0)
    }

    /// [`queue_truth`](Self::queue_truth) of queue `q`.
    pub fn queue_truth_of(&self, q: usize) -> Vec<(String, FencingToken, bool)> {
        let spec = &self.queues[q];
        let path = spec.path.as_str();
        let recipe = spec.recipe();
        let interop = spec.scheme.interop();
        let live: Vec<(String, FencingToken)> = self
            .zk
            .children(path)
            .into_iter()
            .filter_map(|c| {
                let stat = self.zk.stat(&format!("{path}/{c}"))?;
                (stat.ephemeral_owner != 0).then_some((c, FencingToken(stat.czxid)))
            })
            .collect();
        let names: Vec<String> = live.iter().map(|(n, _)| n.clone()).collect();
        // The candidates' stem is the scheme's own for the recipe, as an
        // observer's default.
        let config = zkelect_core::ObserverConfig::new(path, recipe).with_interop(interop);
        let (queue, _) = zkelect_core::name::queue(&names, config.prefix(), interop, recipe);
        let holders = recipe.holders(&queue);
        queue
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let token = live
                    .iter()
                    .find(|(name, _)| *name == n.name)
                    .map_or(FencingToken(0), |(_, t)| *t);
                (n.name.clone(), token, holders.contains(&i))
            })
            .collect()
    }

    /// The election path's children right now (for tests and the demo).
    pub fn children(&self) -> Vec<String> {
        self.zk.children(PATH)
    }

    /// Queue `q`'s children right now.
    pub fn children_of(&self, q: usize) -> Vec<String> {
        self.zk.children(&self.queues[q].path)
    }

    /// The side queues' persistent look-alikes, as whole paths.
    pub fn side_lookalikes(&self) -> &[String] {
        &self.side_lookalikes
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
            match self.queue.next_at() {
                Some(next) if next <= at => {
                    self.step();
                }
                _ => break,
            }
        }
        self.now = self.now.max(at);
        self.violation.clone()
    }

    /// Where the world's choices come from (a search reads its script back).
    pub fn choices(&self) -> &Choices {
        &self.rng
    }

    /// The same, to steer it mid-run (a search opens a window of branching
    /// choices after each fault).
    pub fn choices_mut(&mut self) -> &mut Choices {
        &mut self.rng
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
        let Some((at, ev)) = self.queue.pop() else {
            return false;
        };
        self.now = at;
        self.stats.steps += 1;
        self.deliver(ev);
        if cfg!(debug_assertions) {
            self.check_census();
        }
        self.observe_step();
        true
    }

    /// Runs the step's checkers, skipping those whose last pass holds.
    fn observe_step(&mut self) {
        let Some(mut judges) = self.judges.take() else {
            return;
        };
        let key = StepKey {
            generation: self.generation,
            zxid: self.zk.zxid(),
            phase: self.phase,
            procs: self.procs.len(),
        };
        let counts = CountsKey {
            counts: self.counts_version,
            phase: self.phase,
            procs: self.procs.len(),
        };
        if judges.all_held == Some(key) || judges.counts_held == Some(counts) {
            self.judges = Some(judges);
            return;
        }
        let Judges {
            invariants,
            by_kind,
            held,
            all_held,
            counts_held,
        } = &mut *judges;
        *all_held = Some(key);
        let mut all_counts = true;
        if let Some(list) = by_kind.get(Kinds::STEP.index()) {
            for &i in list {
                let (Some(invariant), Some(held)) = (invariants.get_mut(i), held.get_mut(i)) else {
                    continue;
                };
                match *held {
                    Some(Held::Step(k)) if k == key => {
                        all_counts = false;
                        continue;
                    }
                    Some(Held::Counts(c)) if c == counts => continue,
                    _ => {}
                }
                match invariant.check_step(self) {
                    Ok(Holds::UntilChange) => {
                        *held = Some(Held::Step(key));
                        all_counts = false;
                    }
                    Ok(Holds::UntilCountsChange) => *held = Some(Held::Counts(counts)),
                    Ok(Holds::ThisStep) => {
                        *held = None;
                        *all_held = None;
                        all_counts = false;
                    }
                    Err(detail) => {
                        *held = None;
                        *all_held = None;
                        all_counts = false;
                        self.fail(invariant.name(), detail);
                    }
                }
            }
        }
        *counts_held = all_counts.then_some(counts);
        self.judges = Some(judges);
    }

    fn observe(&mut self, event: &Event<'_>) {
        // A checker only reads the world, so none runs inside another: the
        // judges are always here when an event is judged.
        let Some(mut judges) = self.judges.take() else {
            return;
        };
        let Judges {
            invariants,
            by_kind,
            ..
        } = &mut *judges;
        if let Some(list) = by_kind.get(event.kind().index()) {
            for &i in list {
                if let Some(invariant) = invariants.get_mut(i) {
                    if let Err(detail) = invariant.check(self, event) {
                        self.fail(invariant.name(), detail);
                    }
                }
            }
        }
        self.judges = Some(judges);
    }

    fn fail(&mut self, invariant: &'static str, detail: String) {
        if self.violation.is_none() {
            self.trace.note(self.now, None, '!', || {
                format!("VIOLATION {invariant}: {detail}")
            });
            self.violation = Some(Violation {
                invariant,
                at: self.now,
                step: self.stats.steps,
                detail,
            });
        }
    }

    fn push(&mut self, at: Timestamp, ev: Ev) {
        self.queue.push(at.max(self.now), ev);
    }

    /// Who process `pid`'s sessions (an operator's: `None`) authenticate as.
    fn identity(&self, pid: Option<usize>) -> Option<String> {
        self.knobs.acl.identity(pid)
    }

    fn spawn(&mut self) {
        let pid = self.procs.len();
        // Candidates at the start may ride on an earlier one's session;
        // spawned ones have their own.
        let host = if pid < self.swarm.candidates {
            self.swarm.env.hosting.host(pid)
        } else {
            pid
        };
        self.spawn_on(Some(host));
    }

    /// Starts a zkelect candidate of the joining queue on candidate `on`'s
    /// session (`None`, or its own pid: a session of its own).
    fn spawn_on(&mut self, on: Option<usize>) {
        let pid = self.procs.len();
        let host = on.unwrap_or(pid);
        let spec = &self.queues[self.joining];
        let rule = spec.queue.rule(spec.leaders, self.seed, pid);
        let scheme = spec.scheme;
        let mut builder = Config::builder(spec.path.clone(), format!("p{pid}"))
            .rule(rule)
            .policy(self.swarm.policy)
            .acl(self.knobs.acl.acl())
            .container_parent(self.knobs.container_parent)
            .nonce_seed(self.seed.wrapping_mul(31).wrapping_add(pid as u64));
        let foreign_names = scheme != Scheme::Ours;
        builder = self
            .knobs
            .options
            .configure(builder, self.seed, pid, rule, foreign_names);
        builder = interop(builder, scheme);
        if let Some(canary) = self.canary {
            builder = canary.configure(builder);
        }
        let config = match builder.build() {
            Ok(c) => c,
            Err(e) => return self.fail("config", format!("{e}")),
        };
        self.start_on(Agent::Zkelect(Box::new(Candidate::new(config))), host);
    }

    /// Starts a model of the swarm's foreign library (Curator when the
    /// candidates do not interoperate with either).
    fn spawn_foreign(&mut self) {
        let pid = self.procs.len();
        let id = format!("p{pid}");
        let seed = self.seed.wrapping_mul(37).wrapping_add(pid as u64);
        let agent = match self.swarm.env.interop {
            Scheme::Kazoo => Agent::Kazoo(KazooLock::new(PATH, &id, self.knobs.acl.acl(), seed)),
            Scheme::Curator | Scheme::Ours => {
                Agent::Curator(CuratorLatch::new(PATH, &id, self.knobs.acl.acl(), seed))
            }
        };
        self.start(agent);
    }

    fn start(&mut self, c: Agent) {
        let pid = self.procs.len();
        self.start_on(c, pid);
    }

    /// Starts machine `c` on the session of machine `host` (its own when
    /// `host` is its pid).
    fn start_on(&mut self, mut c: Agent, host: usize) {
        let pid = self.procs.len();
        c.join(self.now);
        self.net.add();
        let host = if host < pid && self.procs[host].host == host {
            host
        } else {
            pid
        };
        self.procs.push(Proc {
            c,
            host,
            queue: self.joining,
            machines: if host == pid { vec![pid] } else { Vec::new() },
            watches: BTreeMap::new(),
            crashed: false,
            session: None,
            timeout: self.swarm.session_timeout,
            handshaken: None,
            started: None,
            conn: Conn::Disconnected,
            gen: 0,
            last_from_server: self.now,
            last_to_server: self.now,
            connected_at: self.now,
            ping_out: false,
            tick_at: None,
            inflight: InflightTable::default(),
            paused_until: None,
            resumed_at: Timestamp::ZERO,
            event_tail: Timestamp::ZERO,
            lag_until: None,
            timer_at: None,
            session_closed: false,
            writing: false,
            revoked: None,
        });
        if host != pid {
            self.procs[host].machines.push(pid);
            self.recount(pid);
            return self.join_session(pid);
        }
        self.recount(pid);
        let mut at = self.now + Duration::from_millis(self.rng.range(0, 50));
        // A late start holds back every session that carries more than
        // observers (riders join later; the host decides), so that the
        // observers list the queue before anyone makes its path.
        if let Some(late) = self.swarm.env.late_start {
            if self.now == Timestamp::ZERO && self.procs[pid].c.observer().is_none() {
                at = at + late;
            }
        }
        self.push(at, Ev::Reconnect { pid });
    }

    fn server_up(&self) -> bool {
        self.server_down_until.is_none()
    }

    /// Whether a message that got past the partition check can be handled:
    /// the process is alive and the server up.
    fn linked(&self, pid: usize) -> bool {
        !self.procs[self.procs[pid].host].crashed && self.server_up()
    }

    /// Whether a new connection can be made: linked, and no partition in
    /// either direction (a TCP handshake needs both).
    fn reachable(&self, pid: usize) -> bool {
        self.linked(pid) && self.net.open(pid, self.now)
    }

    fn deliver(&mut self, ev: Ev) {
        let (ev, arrival) = match ev {
            Ev::Held(ev) => (*ev, Arrival::Held),
            ev => (ev, Arrival::Fresh),
        };
        // A paused process handles nothing: its events wait for it, in order
        // (messages on its link through the link's verdict, which keeps them
        // FIFO with those a partition holds).
        let paused_until = match ev.handler() {
            Some(pid) => {
                let h = self.procs[pid].host;
                if self.procs[h].crashed {
                    if let (Some((link, way)), Arrival::Held) = (ev.crossing(), arrival) {
                        self.net.drop_held(link, way);
                    }
                    return;
                }
                self.procs[h].paused_until.filter(|&t| self.now < t)
            }
            None => None,
        };
        if let Some((link, way)) = ev.crossing() {
            if let Some(at) = self.net.verdict(link, self.now, way, arrival, paused_until) {
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
                if self.procs[pid].gen == gen && self.linked(pid) {
                    if let Some(s) = self.procs[pid].session {
                        self.zk.touch(self.now, s);
                    }
                    let at = self.client_arrival(pid);
                    self.push(at, Ev::Pong { pid, gen });
                }
            }
            Ev::Pong { pid, gen } => self.pong(pid, gen),
            Ev::ClientTick { pid, gen, at } => self.client_tick(pid, gen, at),
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
                    self.after(pid, None, || "timer".into());
                }
            }
            Ev::Expiry => self.expire(),
            Ev::Fault(fault) => self.inject(fault),
            Ev::ServerUp => {
                self.server_down_until = None;
                self.zk.restart(self.now);
                self.trace.note(self.now, None, 'S', || "server up".into());
            }
            Ev::Closed { pid, gen } => {
                if self.procs[pid].gen == gen {
                    self.disconnect(pid, "the server closed the connection");
                }
            }
            Ev::LocalFail { pid, op } => {
                self.deliver_reply(pid, op, None, Err(ZkCode::ConnectionLoss));
            }
            Ev::LocalReply { pid, op, result } => self.deliver_reply(pid, op, None, *result),
            Ev::Resume { pid } => {
                // Overlapping pauses end with the last one.
                if self.procs[pid].paused_until.is_some_and(|t| t <= self.now) {
                    self.procs[pid].paused_until = None;
                    self.procs[pid].resumed_at = self.now;
                    self.trace
                        .note(self.now, Some(pid), 'r', || "resumed".into());
                }
            }
            Ev::AppWrite { pid } => self.app_write(pid),
            Ev::Write { pid, token } => self.resource_write(pid, token),
            Ev::Heal => {
                self.phase = Phase::Healed;
                self.trace
                    .note(self.now, None, 'H', || "faults stop".into());
            }
            Ev::LivenessDue => {
                self.phase = Phase::Settled;
                if self.procs.iter().any(|p| p.c.observer().is_some()) {
                    self.push(self.now + SETTLE, Ev::Quiet);
                }
                self.trace
                    .note(self.now, None, 'L', || "liveness bound reached".into());
                self.observe(&Event::LivenessDue);
                self.push(self.now + SETTLE, Ev::CloseAll);
            }
            Ev::Quiet => {
                self.stats.observer_checks += self
                    .processes()
                    .filter(|p| p.observer && !p.crashed)
                    .count() as u64;
                self.observe(&Event::Quiet);
            }
            Ev::CloseAll => {
                self.phase = Phase::Closing;
                for pid in 0..self.procs.len() {
                    if !self.procs[self.procs[pid].host].crashed {
                        self.procs[pid].c.close(self.now);
                        self.after(pid, None, || "close (end of run)".into());
                    }
                }
                let t = self.negotiated();
                self.push(self.now + t * 2 + Duration::from_secs(3), Ev::End);
            }
            Ev::End => {
                self.observe(&Event::End);
                self.done = true;
            }
            // Unwrapped above; a message is never wrapped twice.
            Ev::Held(ev) => self.deliver(Ev::Held(ev)),
        }
    }

    fn expire(&mut self) {
        if let (Some(keeper), true) = (self.keeper, self.server_up()) {
            self.zk.keep_alive(self.now, keeper);
        }
        if self.server_up() {
            let (expired, fired) = self.zk.expire_due(self.now);
            for s in expired {
                self.trace.note(self.now, None, 'x', || {
                    format!("server expired session {s}")
                });
                // The server closes an expired session's connection.
                if let Some(pid) = self.procs.iter().position(|p| p.session == Some(s)) {
                    self.recount(pid);
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
            self.ensemble_tick();
        }
        self.push(self.now + Duration::from_millis(200), Ev::Expiry);
    }

    /// The ensemble's member faults (see [`Server::tick`]): a member that
    /// drops its clients closes their connections.
    fn ensemble_tick(&mut self) {
        let (dropped, fired, notes) = self.zk.tick(self.now);
        for note in notes {
            self.trace.note(self.now, None, 'Z', || note.clone());
            self.tell(note);
        }
        for s in dropped {
            if let Some(pid) = self.procs.iter().position(|p| p.session == Some(s)) {
                if self.procs[pid].conn == Conn::Connected {
                    let gen = self.procs[pid].gen;
                    let at = self.client_arrival(pid);
                    self.push(at, Ev::Closed { pid, gen });
                }
            }
        }
        self.send_fired(fired);
    }

    fn on_request(
        &mut self,
        pid: usize,
        gen: u64,
        op: OpId,
        request: Rc<Request>,
        cause: Option<u64>,
    ) {
        if self.procs[pid].gen != gen || !self.linked(pid) {
            return;
        }
        let Some(session) = self.procs[pid].session else {
            return;
        };
        let mut from = pid;
        let mut arms = None;
        if let Some(entry) = self.procs[pid].inflight.get_mut(&op) {
            entry.arrived = true;
            from = entry.pid;
            arms = entry.arms.clone();
        }
        if let Some(entry) = &arms {
            self.armed_applied(from, entry);
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
        let (result, fired) = self.zk.apply(self.now, session, &request);
        self.zk.answered(pid, op);
        self.send_fired(fired);
        // With reorder, a reply may overtake watch events already on their way.
        let overtake = self.swarm.reorder && self.rng.chance(0.2);
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
    fn send_fired(&mut self, fired: Vec<Fired>) {
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

    /// What `canary` may know of process `pid` when it rewrites.
    pub fn canary_view(&self, pid: usize, canary: Canary) -> crate::canary::View {
        let c = &self.procs[pid].c;
        let config = c.candidate().map(|c| c.config());
        let own = c.node().map(str::to_owned);
        let predecessor = match (&own, config) {
            (Some(own), Some(config)) if canary == Canary::ReaderWatchesPredecessor => {
                let children = self.zk.children(self.path_of(pid));
                let recipe = config.rule().recipe();
                let (queue, _) =
                    zkelect_core::name::queue(&children, config.prefix(), config.interop(), recipe);
                queue
                    .iter()
                    .position(|n| &n.name == own)
                    .and_then(|at| at.checked_sub(1))
                    .map(|i| queue[i].name.clone())
            }
            _ => None,
        };
        crate::canary::View {
            scheme: self.queues[self.procs[pid].queue].scheme,
            rule: config.map_or_else(Default::default, |c| c.rule()),
            own,
            prefix: config.map_or_else(String::new, |c| c.prefix().to_owned()),
            watching: c.candidate().and_then(|c| c.watching()).map(str::to_owned),
            predecessor,
        }
    }

    /// How many followers one server change may wake, by the queue's rule
    /// (its watch events reach exactly the watchers of `event.path`):
    ///
    /// - an election or a semaphore with k: the k nodes above (each watches
    ///   its k nearest lower); a mutex: 1 (its successor);
    /// - a read-write lock: a writer's node is watched by every reader above
    ///   it up to the next writer (each reader watches its nearest lower
    ///   writer) or, with no reader right above it, by that writer (a writer
    ///   watches its predecessor); a reader's node by the writer right above
    ///   it, if any: 1.
    ///
    /// A change to the parent (a child created) wakes nobody under the
    /// predecessor recipe: k is the bound there too. Persistent look-alikes
    /// are left out, as the candidates leave them out.
    pub fn herd_bound(&self, event: &WatchEvent) -> usize {
        let q = self.queue_of_path(&event.path).unwrap_or(0);
        let spec = &self.queues[q];
        let path = spec.path.as_str();
        let k = spec.leaders as usize;
        let recipe = spec.recipe();
        if recipe != Recipe::ReadWrite {
            return k;
        }
        let Some(name) = event
            .path
            .strip_prefix(path)
            .and_then(|n| n.strip_prefix('/'))
        else {
            return k;
        };
        let interop = spec.scheme.interop();
        // Persistent look-alikes are no contenders (the candidates skip
        // them): a writer-named one between readers does not split them.
        let mut children: Vec<String> = self
            .zk
            .children(path)
            .into_iter()
            .filter(|c| {
                self.zk
                    .stat(&format!("{path}/{c}"))
                    .is_some_and(|s| s.ephemeral_owner != 0)
            })
            .collect();
        if !children.iter().any(|c| c == name) {
            children.push(name.to_owned());
        }
        let (queue, _) = zkelect_core::name::queue(&children, "", interop, recipe);
        let Some(at) = queue.iter().position(|n| n.name == name) else {
            return k;
        };
        if queue[at].access == Access::Shared {
            return 1;
        }
        let readers = queue[at + 1..]
            .iter()
            .take_while(|n| n.access == Access::Shared)
            .count();
        readers.max(1)
    }

    /// Drains the candidate (notices, commands, timeout) after it handled
    /// something; `cause` is the server change whose watch event woke it.
    /// `text` says what happened, for a readable trace only (it is not
    /// formatted otherwise).
    fn after(&mut self, pid: usize, cause: Option<u64>, text: impl FnOnce() -> String) {
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
        let text = || match foreign {
            Some(scheme) => format!("{scheme}: {}", text()),
            None => text(),
        };
        // Taken, not borrowed: `send` below needs the whole world (and a
        // nested drain, if any, starts from an empty buffer).
        let mut commands = std::mem::take(&mut self.commands);
        commands.extend(std::iter::from_fn(|| self.procs[pid].c.poll_command()));
        let mut verbs = std::mem::take(&mut self.verbs);
        verbs.extend(commands.iter().map(|c| c.request.verb()));
        let p = &self.procs[pid];
        self.trace.step(
            self.now,
            pid,
            p.c.role(),
            p.c.node(),
            p.c.watching(),
            &verbs,
            text,
            &notices,
        );
        verbs.clear();
        self.verbs = verbs;
        for Command { op, request } in commands.drain(..) {
            self.observe(&Event::Emitted { pid, op });
            self.send(pid, op, request, cause);
        }
        self.commands = commands;
        let h = self.procs[pid].host;
        if !self.procs[h].session_closed
            && self.procs[h]
                .machines
                .iter()
                .all(|&m| self.procs[m].c.is_closed())
        {
            self.close_client(h);
        }
        // Only this machine's agent changed (closing the client recounts
        // the session's machines itself): the others' shares stand.
        self.recount_one(pid);
        let next = self.procs[pid].c.poll_timeout();
        if next.is_some() && next != self.procs[pid].timer_at {
            self.procs[pid].timer_at = next;
            if let Some(at) = next {
                self.push(at, Ev::Timer { pid });
            }
        }
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
                Notice::TokenRegressed { before, now } => Some(format!(
                    "p{pid}'s new token {now} is below its last one, {before}"
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
            // Readers share: only exclusive holders write (one at a time).
            let exclusive = self.procs[pid]
                .c
                .candidate()
                .is_none_or(|c| c.config().rule().access() == Access::Exclusive);
            if self.queues[self.procs[pid].queue].leaders == 1
                && exclusive
                && !self.procs[pid].writing
            {
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
        let max = &mut self.resource_max[self.procs[pid].queue];
        let accepted = max.is_none_or(|m| token >= m);
        if accepted {
            *max = Some(token);
            self.stats.fenced_writes += 1;
        } else {
            let seen = max.map_or(0, |t| t.0);
            self.stats.fenced_rejections += 1;
            self.trace.note(self.now, Some(pid), 'w', || {
                format!("fenced resource rejects token {token} (has seen {seen})")
            });
        }
        self.observe(&Event::Write {
            pid,
            token,
            accepted,
        });
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
        Reply::Synced => "synced".into(),
    }
}

/// Sets the candidates' interop scheme.
fn interop(builder: ConfigBuilder, scheme: Scheme) -> ConfigBuilder {
    builder.interop(scheme.interop())
}
