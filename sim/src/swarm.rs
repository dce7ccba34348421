//! What one seed decides: the scenario (VOPR's "swarm" testing) and its fault plan.

use std::fmt;
use std::time::Duration;

use zkelect_core::{
    Acl, AclEntry, ConfigBuilder, ConnectionPolicy, Perms, Recipe, Rule, Timestamp, WatchStrategy,
};

pub use crate::foreign::Scheme;
pub use crate::rng::SimRng;

/// Which faults a run may inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultMix {
    /// None: elections and hand-offs only.
    None,
    /// Connection drops, partitions, crashes, server restarts, reordering.
    #[default]
    Standard,
    /// The standard mix plus process pauses (checked with a fenced resource).
    WithPauses,
    /// The standard mix plus client event threads that lag behind replies
    /// (`Fault::LagEvents`).
    WithEventLag,
}

impl FaultMix {
    /// Every mix.
    pub const ALL: [FaultMix; 4] = [
        FaultMix::None,
        FaultMix::Standard,
        FaultMix::WithPauses,
        FaultMix::WithEventLag,
    ];

    /// Its name on the command line (`zkelect sim --faults`) and in
    /// `ZKELECT_FAULTS`.
    pub fn flag(self) -> &'static str {
        match self {
            FaultMix::None => "none",
            FaultMix::Standard => "all",
            FaultMix::WithPauses => "pauses",
            FaultMix::WithEventLag => "lag",
        }
    }

    /// The mix spelled `flag`, if any.
    pub fn from_flag(flag: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.flag() == flag)
    }
}

/// One injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The process's connection drops; its unsent-to-server requests are applied or not.
    DropConnection {
        /// Process index.
        pid: usize,
        /// Whether requests in flight reach the server anyway.
        applied: bool,
    },
    /// Messages to and from the process are lost for a while.
    Partition {
        /// Process index.
        pid: usize,
        /// How long.
        ms: u64,
    },
    /// Messages in one direction only are held for a while (the other way
    /// works): the client and the server find out at different moments.
    PartitionOneWay {
        /// Process index.
        pid: usize,
        /// How long.
        ms: u64,
        /// Cuts client → server (else server → client).
        to_server: bool,
    },
    /// The process stops (candidate and client library); the world goes on.
    Pause {
        /// Process index.
        pid: usize,
        /// How long.
        ms: u64,
    },
    /// The process dies; its session expires on the server later.
    Crash {
        /// Process index.
        pid: usize,
    },
    /// The server goes down and comes back with its sessions.
    RestartServer {
        /// Downtime.
        ms: u64,
    },
    /// The application resigns (and rejoins or not).
    Resign {
        /// Process index.
        pid: usize,
        /// Rejoin at the back.
        rejoin: bool,
    },
    /// The application closes the candidate.
    Close {
        /// Process index.
        pid: usize,
    },
    /// A new candidate starts and joins.
    Spawn,
    /// Whoever leads at that moment crashes.
    CrashLeader,
    /// Whoever leads at that moment is cut off for a while.
    PartitionLeader {
        /// How long.
        ms: u64,
    },
    /// Whoever leads at that moment closes (a graceful exit).
    CloseLeader,
    /// Whoever leads at that moment freezes for a while (pause runs only).
    PauseLeader {
        /// How long.
        ms: u64,
    },
    /// An operator deletes the process's node (a forced hand-off).
    Revoke {
        /// Process index.
        pid: usize,
    },
    /// An operator deletes the node of whoever leads at that moment.
    RevokeLeader,
    /// An operator deletes the whole election: every node, then the path.
    WipeElection,
    /// An operator (or another application) sets the data of the process's
    /// node: its watchers get `NodeDataChanged`, not `NodeDeleted`.
    TouchData {
        /// Process index.
        pid: usize,
    },
    /// For a while, the process's client library hands watch events to the
    /// application late (up to [`EVENT_LAG_MAX_MS`](crate::world::EVENT_LAG_MAX_MS)),
    /// while replies do not wait for them: a reply can overtake events the
    /// server sent well before it (zookeeper-async's watcher channel).
    LagEvents {
        /// Process index.
        pid: usize,
        /// How long.
        ms: u64,
    },
    /// An operator creates a PERSISTENT node named like a contender of
    /// `scheme` (a sequential create, so it sorts after every node there now).
    Lookalike {
        /// Whose contenders it looks like.
        scheme: Scheme,
    },
    /// A new model of the swarm's foreign library ([`Env::interop`]) starts and joins.
    SpawnForeign,
    /// Every message to and from the process takes longer for a while (a slow
    /// link: reorders it against every other session).
    Delay {
        /// Process index.
        pid: usize,
        /// How long.
        ms: u64,
        /// Extra latency per message.
        extra_ms: u64,
    },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DropConnection { pid, applied } => write!(f, "drop p{pid} applied={applied}"),
            Self::Partition { pid, ms } => write!(f, "partition p{pid} {ms}ms"),
            Self::Pause { pid, ms } => write!(f, "pause p{pid} {ms}ms"),
            Self::Crash { pid } => write!(f, "crash p{pid}"),
            Self::RestartServer { ms } => write!(f, "restart-server {ms}ms"),
            Self::Resign { pid, rejoin } => write!(f, "resign p{pid} rejoin={rejoin}"),
            Self::Close { pid } => write!(f, "close p{pid}"),
            Self::Spawn => write!(f, "spawn"),
            Self::CrashLeader => write!(f, "crash the leader"),
            Self::PartitionLeader { ms } => write!(f, "partition the leader {ms}ms"),
            Self::CloseLeader => write!(f, "close the leader"),
            Self::PauseLeader { ms } => write!(f, "pause the leader {ms}ms"),
            Self::Revoke { pid } => write!(f, "revoke p{pid}"),
            Self::RevokeLeader => write!(f, "revoke the leader"),
            Self::WipeElection => write!(f, "delete the election"),
            Self::LagEvents { pid, ms } => write!(f, "lag p{pid}'s watch events for {ms}ms"),
            Self::PartitionOneWay { pid, ms, to_server } => {
                let dir = if *to_server { "to server" } else { "to client" };
                write!(f, "partition p{pid} {dir} only {ms}ms")
            }
            Self::TouchData { pid } => write!(f, "set-data p{pid}"),
            Self::Delay { pid, ms, extra_ms } => {
                write!(f, "delay p{pid} +{extra_ms}ms for {ms}ms")
            }
            Self::Lookalike { scheme } => write!(f, "persistent {scheme} look-alike"),
            Self::SpawnForeign => write!(f, "spawn a foreign contender"),
        }
    }
}

/// The scenario a seed picks.
#[derive(Debug, Clone, PartialEq)]
pub struct Swarm {
    /// Candidates at the start.
    pub candidates: usize,
    /// Leaders wanted.
    pub leaders: u32,
    /// Requested session timeout.
    pub session_timeout: Duration,
    /// The leaders' connection policy.
    pub policy: ConnectionPolicy,
    /// Length of the chaos phase.
    pub chaos: Duration,
    /// Whether replies may overtake earlier watch events at the client (as zookeeper-async does).
    pub reorder: bool,
    /// Whether processes may be paused.
    pub pauses: bool,
    /// The faults and intents of the chaos phase, in time order.
    pub plan: Vec<(Timestamp, Fault)>,
    /// The world around the candidates: server limits, interop, foreign
    /// contenders, persistent look-alikes (`Env::default()`: none of them).
    pub env: Env,
}

impl fmt::Display for Swarm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "candidates={} leaders={} session_timeout={}ms policy={:?} chaos={}ms reorder={} pauses={} faults={} {}",
            self.candidates,
            self.leaders,
            self.session_timeout.as_millis(),
            self.policy,
            self.chaos.as_millis(),
            self.reorder,
            self.pauses,
            self.plan.len(),
            self.env
        )
    }
}

/// The recipe of the swarm's queue: every zkelect process of one
/// queue shares it, and the k of an election or a semaphore is
/// [`Swarm::leaders`]. `Queue::default()` is an election (as every hand-built
/// scenario was before the swarm drew locks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Queue {
    /// Leader election with [`Swarm::leaders`] leaders.
    #[default]
    Election,
    /// A fair mutex (`leaders` is 1).
    Mutex,
    /// A semaphore with [`Swarm::leaders`] permits.
    Semaphore,
    /// A read-write lock (`leaders` is 1): each process is a writer or a
    /// reader, drawn per process ([`Queue::rule`]).
    ReadWrite {
        /// How many in a hundred processes write.
        writers: u8,
    },
}

impl Queue {
    /// Draws the queue for `seed` (from a stream of its own, so the rest of
    /// the scenario stays put): 4 in 10 an election (k its old draw, 1–2, or
    /// 3–5 for one in three), 2 in 10 a mutex, 2 in 10 a semaphore (k ∈
    /// 2..5), 2 in 10 a read-write lock with 10, 20, … 90 % writers. With `one`
    /// (pause runs: the fenced resource fences one holder at a time) never a
    /// semaphore nor an election with k > 1. Returns the queue and its k.
    pub fn draw(seed: u64, leaders: u32, one: bool) -> (Self, u32) {
        Self::draw_from(&mut SimRng::new(seed, 6), leaders, one)
    }

    /// [`draw`](Self::draw) from a given stream.
    fn draw_from(rng: &mut SimRng, leaders: u32, one: bool) -> (Self, u32) {
        match rng.range(0, 9) {
            0..=3 if one => (Queue::Election, 1),
            0..=3 if rng.chance(1.0 / 3.0) => (Queue::Election, rng.range(3, 5) as u32),
            0..=3 => (Queue::Election, leaders),
            4..=5 => (Queue::Mutex, 1),
            6..=7 if one => (Queue::Mutex, 1),
            6..=7 => (Queue::Semaphore, rng.range(2, 5) as u32),
            _ => (
                Queue::ReadWrite {
                    writers: rng.range(1, 9) as u8 * 10,
                },
                1,
            ),
        }
    }

    /// The core's recipe for this queue with `k` holders.
    pub fn recipe(self, k: u32) -> Recipe {
        match self {
            Queue::Election => Recipe::Election { leaders: k },
            Queue::Mutex => Recipe::Mutex,
            Queue::Semaphore => Recipe::Semaphore { permits: k },
            Queue::ReadWrite { .. } => Recipe::ReadWrite,
        }
    }

    /// The rule of zkelect process `pid` in the queue of `seed` with `k`
    /// holders: in a read-write lock a writer for `writers` in a hundred
    /// pids (a hash of seed and pid, so a spawned process draws too).
    pub fn rule(self, k: u32, seed: u64, pid: usize) -> Rule {
        match self {
            Queue::ReadWrite { writers } => {
                let roll = SimRng::new(seed ^ (pid as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15), 7)
                    .range(0, 99);
                if roll < u64::from(writers) {
                    Rule::Write
                } else {
                    Rule::Read
                }
            }
            other => other.recipe(k).rule(zkelect_core::name::Access::Exclusive),
        }
    }

    /// Its name in a scenario line.
    pub fn label(self) -> String {
        match self {
            Queue::Election => "election".into(),
            Queue::Mutex => "mutex".into(),
            Queue::Semaphore => "semaphore".into(),
            Queue::ReadWrite { writers } => format!("rw({writers}%w)"),
        }
    }
}

/// The world a seed puts around the zkelect candidates (the environment users give it): how the
/// server clamps session timeouts, which naming scheme the candidates use,
/// which other library's contenders share their queue, and which PERSISTENT
/// children named like contenders sit in it.
///
/// `Env::default()` is the plain world: default server limits, interop off, no
/// foreign contenders, no look-alikes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Env {
    /// The scheme zkelect candidates name their nodes in (their interop setting).
    pub interop: Scheme,
    /// Models of the interop scheme's library that start with the candidates
    /// (pids right after the zkelect candidates). Zero with `Scheme::Ours`.
    pub foreign: usize,
    /// PERSISTENT look-alikes an operator creates before anyone joins (with
    /// sequential creates, so they sort below every contender).
    pub lookalikes: Vec<Scheme>,
    /// The server's `minSessionTimeout` (`None`: its default, 2 ticks).
    pub min_session_timeout: Option<Duration>,
    /// The server's `maxSessionTimeout` (`None`: its default, 20 ticks).
    pub max_session_timeout: Option<Duration>,
    /// The queue's recipe (its k is [`Swarm::leaders`]).
    pub queue: Queue,
    /// Which candidates share a session, and the observers.
    pub hosting: Hosting,
    /// An ensemble of 3 or 5 and its member faults (`None`: one server).
    pub ensemble: Option<crate::server::EnsembleSpec>,
    /// Sessions whose connect string has a chroot that cannot hold the
    /// queue ([`BadChroot`]; `None`: every connect string is plain).
    pub chroot: Option<BadChroot>,
    /// Every session that carries more than observers connects this late,
    /// so that the observers list the queue before its path exists
    /// (`None`: all connect within 50 ms of the start).
    pub late_start: Option<Duration>,
}

/// What a bad chroot names ([`BadChroot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChrootRoot {
    /// A node that does not exist (`/apps/x`).
    Missing,
    /// An ephemeral node (`/eph`, which a session of the operator's holds
    /// for the whole run): it cannot have children.
    Ephemeral,
}

impl ChrootRoot {
    /// The chroot, as the connect string gives it.
    pub fn path(self) -> &'static str {
        match self {
            ChrootRoot::Missing => "/apps/x",
            ChrootRoot::Ephemeral => "/eph",
        }
    }
}

/// Connect strings whose chroot cannot hold the queue: the misconfigured
/// part of a fleet (or all of it), drawn in ordinary seeds
/// ([`BadChroot::draw`]). Every machine on such a session must stop with
/// the core's typed `CandidateError::Namespace` after a bounded number of
/// requests (an observer reports an empty queue and waits), and no other
/// machine may report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadChroot {
    /// What the chroot names.
    pub root: ChrootRoot,
    /// The sessions (by their host, a candidate of the first queue at the
    /// start) whose connect string has it, ascending.
    pub hosts: Vec<usize>,
}

impl BadChroot {
    /// Draws it for `seed` from a stream of its own (label 21, so every
    /// other draw stays put): 1 in 8 seeds, missing or ephemeral evenly,
    /// on every session of the first queue's candidates 1 in 4 of those
    /// (the whole fleet misconfigured), else on each such session 1 in 3
    /// (at least one).
    pub fn draw(seed: u64, hosting: &Hosting, candidates: usize) -> Option<Self> {
        let mut rng = SimRng::new(seed, 21);
        if !rng.chance(0.125) {
            return None;
        }
        let root = if rng.chance(0.5) {
            ChrootRoot::Missing
        } else {
            ChrootRoot::Ephemeral
        };
        let sessions: Vec<usize> = (0..candidates).filter(|&p| hosting.host(p) == p).collect();
        let all = rng.chance(0.25);
        let mut hosts: Vec<usize> = sessions
            .iter()
            .copied()
            .filter(|_| all || rng.chance(1.0 / 3.0))
            .collect();
        if hosts.is_empty() {
            let i = rng.range(0, sessions.len() as u64 - 1) as usize;
            hosts.push(sessions[i]);
        }
        Some(Self { root, hosts })
    }
}

/// Several machines on one session, and observers: what the
/// library's `Session` runs, drawn from a stream of its own
/// ([`Hosting::draw`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hosting {
    /// `(pid, host)`: zkelect candidate `pid` runs on the session of the
    /// earlier candidate `host` (which runs on its own), in pid order. Every
    /// other process has a session of its own.
    pub riders: Vec<(usize, usize)>,
    /// The observers of the queue, started after the candidates and foreign
    /// models: each on a session of its own (`None`) or riding on candidate
    /// `Some(host)`'s.
    pub observers: Vec<Option<usize>>,
    /// Further queues on other paths ([`SideQueue`], drawn by
    /// [`Hosting::draw_queues`]), whose machines start after the observers
    /// (queue 1's first, in order), many of them riding on the sessions of
    /// the first queue's candidates.
    pub queues: Vec<SideQueue>,
}

/// A further queue of the world (many recipes on one `Session`):
/// its own path ([`SideQueue::path`]), recipe and k, and machines — zkelect
/// candidates and observers of it, no foreign models (their recipes are
/// elections of the first queue's scheme) — each on a session of its own or
/// riding on one of the first queue's candidates'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideQueue {
    /// Its recipe.
    pub queue: Queue,
    /// Its k (1 for a mutex or a read-write lock).
    pub leaders: u32,
    /// Its machines, in pid order.
    pub machines: Vec<SideMachine>,
}

/// One machine of a [`SideQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SideMachine {
    /// The first queue's candidate whose session it rides on (`None`: a
    /// session of its own).
    pub on: Option<usize>,
    /// An observer of the queue (else a candidate).
    pub observer: bool,
}

impl SideQueue {
    /// The path of side queue `i` (1 and up; queue 0 is
    /// [`PATH`](crate::world::PATH)): a sibling of the first queue's.
    pub fn path(i: usize) -> String {
        format!("/svc/q{i}")
    }

    /// The core's recipe of this queue.
    pub fn recipe(&self) -> Recipe {
        self.queue.recipe(self.leaders)
    }
}

impl Hosting {
    /// At most this many machines share one session.
    pub const PER_SESSION: usize = 4;

    /// Draws the hosting for `seed` with `candidates` zkelect candidates at
    /// the start: 3 in 10 seeds put some of them on shared sessions (each
    /// candidate after the first rides, 1 in 2, on a host among the
    /// candidates before it with room), 3 in 10 have 1–3 observers, 2 in 3
    /// of them riding on a candidate's session; then the side queues
    /// ([`Hosting::draw_queues`], a stream of their own).
    pub fn draw(seed: u64, candidates: usize) -> Self {
        let mut rng = SimRng::new(seed, 8);
        let mut hosting = Hosting::default();
        let mut load = vec![1usize; candidates];
        if candidates > 1 && rng.chance(0.3) {
            for pid in 1..candidates {
                if !rng.chance(0.5) {
                    continue;
                }
                let hosts: Vec<usize> = (0..pid)
                    .filter(|&h| hosting.host(h) == h && load[h] < Self::PER_SESSION)
                    .collect();
                if hosts.is_empty() {
                    continue;
                }
                let h = hosts[rng.range(0, hosts.len() as u64 - 1) as usize];
                load[h] += 1;
                hosting.riders.push((pid, h));
            }
        }
        if rng.chance(0.3) {
            for _ in 0..rng.range(1, 3) {
                let hosts: Vec<usize> = (0..candidates)
                    .filter(|&h| hosting.host(h) == h && load[h] < Self::PER_SESSION)
                    .collect();
                let ride = !hosts.is_empty() && rng.range(0, 2) > 0;
                let on = ride.then(|| hosts[rng.range(0, hosts.len() as u64 - 1) as usize]);
                if let Some(h) = on {
                    load[h] += 1;
                }
                hosting.observers.push(on);
            }
        }
        hosting.draw_queues(seed, candidates);
        hosting
    }

    /// The candidate whose session candidate `pid` runs on (itself if none).
    pub fn host(&self, pid: usize) -> usize {
        self.riders
            .iter()
            .find(|(rider, _)| *rider == pid)
            .map_or(pid, |(_, host)| *host)
    }

    /// How many machines of the side queues start (their pids follow the
    /// observers').
    pub fn side_machines(&self) -> usize {
        self.queues.iter().map(|q| q.machines.len()).sum()
    }

    /// Draws the further queues for `seed` with `candidates`
    /// zkelect candidates at the start, around this hosting's riders and
    /// observers, from a stream of their own (label 20), so every other draw
    /// of a seed stays where it was: 3 in 10 seeds have one (2 in 3) or two
    /// more queues, each its own recipe and k ([`Queue::draw`]'s odds, pause
    /// runs included), with 1–4 machines, 1 in 6 an observer; each rides 2
    /// in 3 on the session of one of the first queue's candidates with room
    /// ([`Hosting::PER_SESSION`]), else has its own. Returns the stream, for
    /// [`Hosting::side_faults`].
    pub fn draw_queues(&mut self, seed: u64, candidates: usize) -> SimRng {
        let mut rng = SimRng::new(seed, 20);
        if !rng.chance(0.3) {
            return rng;
        }
        let mut load = vec![1usize; candidates];
        for &(_, h) in &self.riders {
            load[h] += 1;
        }
        for h in self.observers.iter().flatten() {
            load[*h] += 1;
        }
        let n = if rng.chance(2.0 / 3.0) { 1 } else { 2 };
        for _ in 0..n {
            let leaders = rng.range(1, 2) as u32;
            let (queue, k) = Queue::draw_from(&mut rng, leaders, false);
            let k = match queue {
                Queue::Mutex | Queue::ReadWrite { .. } => 1,
                _ => k.max(1),
            };
            let mut machines = Vec::new();
            for _ in 0..rng.range(1, 4) {
                let hosts: Vec<usize> = (0..candidates)
                    .filter(|&h| self.host(h) == h && load[h] < Self::PER_SESSION)
                    .collect();
                let ride = !hosts.is_empty() && rng.range(0, 2) > 0;
                let on = ride.then(|| hosts[rng.range(0, hosts.len() as u64 - 1) as usize]);
                if let Some(h) = on {
                    load[h] += 1;
                }
                machines.push(SideMachine {
                    on,
                    observer: rng.chance(1.0 / 6.0),
                });
            }
            self.queues.push(SideQueue {
                queue,
                leaders: k,
                machines,
            });
        }
        rng
    }

    /// The faults of the side queues' machines on sessions of their own
    /// (the riders get their hosts'), drawn after the queues from their
    /// stream, at rates like the first queue's: drops, partitions both and
    /// one way, slow links, crashes, lag, resign, revocations, set-data;
    /// pauses in pause runs. Added to `swarm`'s plan (none in a run without
    /// faults).
    pub fn side_faults(swarm: &mut Swarm, seed: u64) {
        let mut probe = Hosting {
            riders: swarm.env.hosting.riders.clone(),
            observers: swarm.env.hosting.observers.clone(),
            queues: Vec::new(),
        };
        let mut rng = probe.draw_queues(seed, swarm.candidates);
        let first = swarm.candidates + swarm.env.foreign + swarm.env.hosting.observers.len();
        let own: Vec<usize> = swarm
            .env
            .hosting
            .queues
            .iter()
            .flat_map(|q| q.machines.iter())
            .enumerate()
            .filter(|(_, m)| m.on.is_none())
            .map(|(i, _)| first + i)
            .collect();
        if swarm.plan.is_empty() || own.is_empty() {
            return;
        }
        let t = swarm.session_timeout.as_millis() as u64;
        let rate = rng.range(0, 60) as f64 / 100.0;
        for second in 0..swarm.chaos.as_secs() {
            if !rng.chance(rate) {
                continue;
            }
            let at = Timestamp::from_millis(second * 1_000 + rng.range(0, 999));
            let pid = own[rng.range(0, own.len() as u64 - 1) as usize];
            let ms = rng.range(t / 4, t * 2);
            let fault = match rng.range(0, if swarm.pauses { 9 } else { 8 }) {
                0 => Fault::DropConnection {
                    pid,
                    applied: rng.chance(0.5),
                },
                1 => Fault::Partition { pid, ms },
                2 => Fault::PartitionOneWay {
                    pid,
                    ms,
                    to_server: rng.chance(0.5),
                },
                3 => Fault::Delay {
                    pid,
                    ms,
                    extra_ms: rng.range(10, t / 4),
                },
                4 => Fault::Crash { pid },
                5 => Fault::LagEvents { pid, ms },
                6 => Fault::Resign {
                    pid,
                    rejoin: rng.chance(0.7),
                },
                7 => Fault::Revoke { pid },
                8 => Fault::TouchData { pid },
                _ => Fault::Pause { pid, ms },
            };
            swarm.plan.push((at, fault));
        }
        swarm.plan.sort_by_key(|(t, _)| *t);
    }
}

/// The simulated server's tick (`tickTime`).
pub const TICK: Duration = Duration::from_millis(200);

impl Env {
    /// The server settings for this world.
    pub fn server(&self, cversion_start: i32) -> crate::zk::ZkSettings {
        crate::zk::ZkSettings {
            tick: TICK,
            cversion_start,
            min_session_timeout: self.min_session_timeout,
            max_session_timeout: self.max_session_timeout,
        }
    }

    /// The library whose models share the queue, if any.
    pub fn library(&self) -> Option<Scheme> {
        (self.foreign > 0 && self.interop != Scheme::Ours).then_some(self.interop)
    }

    /// The look-alike schemes this world may hold. Every scheme, except next
    /// to foreign models their own: Curator and kazoo wait forever behind a
    /// persistent node they count as a contender, and zkelect cannot lead past
    /// a live foreign node that waits, so nothing could lead there.
    pub fn lookalike_schemes(&self) -> Vec<Scheme> {
        Scheme::ALL
            .into_iter()
            .filter(|s| self.library() != Some(*s))
            .collect()
    }

    /// Draws the world for a seed with `leaders` leaders and this requested
    /// timeout (from its own stream, so the rest of the scenario stays put).
    fn draw(seed: u64, leaders: u32, requested: Duration) -> Self {
        let mut rng = SimRng::new(seed, 4);
        let mut env = Env::default();
        let ms = requested.as_millis() as u64;
        let default_max = (TICK * 20).as_millis() as u64;
        match rng.range(0, 9) {
            // The server's maximum below the request: clamped down.
            0..=2 => {
                let max = (ms * rng.range(40, 90) / 100 / 100 * 100).max(1_000);
                env.max_session_timeout = Some(Duration::from_millis(max));
            }
            // Its minimum above the request: clamped up.
            3..=4 => {
                let min = (ms * rng.range(120, 200) / 100 / 100 * 100).min(8_000);
                env.min_session_timeout = Some(Duration::from_millis(min));
                env.max_session_timeout = Some(Duration::from_millis(min.max(default_max)));
            }
            // The defaults (which clamp requests above 20 ticks down).
            _ => {}
        }
        env.interop = match rng.range(0, 9) {
            // Interop elects one leader, as Curator and kazoo do; more is refused.
            _ if leaders > 1 => Scheme::Ours,
            0..=3 => Scheme::Ours,
            4..=6 => Scheme::Curator,
            _ => Scheme::Kazoo,
        };
        // Curator's and kazoo's recipes elect one leader.
        if env.interop != Scheme::Ours && leaders == 1 && rng.chance(0.8) {
            env.foreign = rng.range(1, 4) as usize;
        }
        if rng.chance(0.3) {
            let schemes = env.lookalike_schemes();
            for _ in 0..rng.range(1, 3) {
                let i = rng.range(0, schemes.len() as u64 - 1) as usize;
                env.lookalikes.push(schemes[i]);
            }
        }
        env
    }
}

impl fmt::Display for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms =
            |d: Option<Duration>| d.map_or("default".to_owned(), |d| d.as_millis().to_string());
        let lookalikes: Vec<&str> = self.lookalikes.iter().map(|s| s.label()).collect();
        write!(
            f,
            "queue={} interop={} foreign={} lookalikes=[{}] min_session={} max_session={}",
            self.queue.label(),
            self.interop,
            self.foreign,
            lookalikes.join(","),
            ms(self.min_session_timeout),
            ms(self.max_session_timeout)
        )?;
        if self.hosting != Hosting::default() {
            write!(
                f,
                " riders={:?} observers={:?}",
                self.hosting.riders, self.hosting.observers
            )?;
            for (i, q) in self.hosting.queues.iter().enumerate() {
                let machines: Vec<String> = q
                    .machines
                    .iter()
                    .map(|m| {
                        let kind = if m.observer { "o" } else { "c" };
                        m.on.map_or(kind.to_owned(), |h| format!("{kind}@p{h}"))
                    })
                    .collect();
                write!(
                    f,
                    " {}={}(k={})[{}]",
                    SideQueue::path(i + 1),
                    q.queue.label(),
                    q.leaders,
                    machines.join(",")
                )?;
            }
        }
        if let Some(bad) = &self.chroot {
            write!(f, " chroot={}@{:?}", bad.root.path(), bad.hosts)?;
        }
        if let Some(late) = self.late_start {
            write!(f, " late_start={}ms", late.as_millis())?;
        }
        match &self.ensemble {
            Some(spec) => write!(f, " {spec}"),
            None => Ok(()),
        }
    }
}

/// Overrides for what the seed would otherwise pick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Candidates at the start.
    pub candidates: Option<usize>,
    /// Leaders wanted.
    pub leaders: Option<u32>,
    /// Which faults.
    pub faults: FaultMix,
    /// The queue's recipe (an election keeps the seed's k, or `leaders`).
    /// Setting `leaders` alone means an election.
    pub queue: Option<Queue>,
}

impl Swarm {
    /// Draws the scenario and its plan from `seed`, and its queue's recipe
    /// ([`Queue::draw`], unless overridden; an override of `leaders` alone
    /// means an election).
    pub fn from_seed(seed: u64, overrides: Overrides) -> Self {
        let mut swarm = Self::from_seed_without_side_faults(seed, overrides);
        Hosting::side_faults(&mut swarm, seed);
        // Not in a canary's seeds (`one_queue_from_seed`): they keep the
        // worlds they were documented with.
        swarm.env.chroot = BadChroot::draw(seed, &swarm.env.hosting, swarm.candidates);
        swarm.observers_through_absence(seed);
        swarm
    }

    /// [`from_seed`](Self::from_seed) without the further queues (a
    /// canary's seeds keep the world they were documented with).
    pub(crate) fn one_queue_from_seed(seed: u64, overrides: Overrides) -> Self {
        let mut swarm = Self::from_seed_without_side_faults(seed, overrides);
        swarm.env.hosting.queues.clear();
        swarm
    }

    /// The scenario with its hosting as [`Hosting::draw`] gives it, side
    /// queues included, before their faults.
    fn from_seed_without_side_faults(seed: u64, overrides: Overrides) -> Self {
        let mut swarm = Self::election_from_seed(seed, overrides);
        swarm.env.ensemble = crate::server::EnsembleSpec::draw(
            seed,
            swarm.chaos,
            swarm.session_timeout,
            overrides.faults != FaultMix::None,
        );
        let queue = match (overrides.queue, overrides.leaders) {
            (Some(q), _) => (q, swarm.leaders),
            (None, Some(k)) => (Queue::Election, k),
            // Pause runs draw every recipe too: `safety` judges
            // them by belief and lease, `fencing` the k = 1 queues.
            (None, None) => Queue::draw(seed, swarm.leaders, false),
        };
        let mut swarm = swarm.with_queue(queue.0, queue.1);
        swarm.env.hosting = Hosting::draw(seed, swarm.candidates);
        swarm
    }

    /// How late `seed` starts the sessions that carry more than observers,
    /// when it does ([`Env::late_start`]): 1–3 s.
    pub fn late_start_of(seed: u64) -> Duration {
        Duration::from_millis(SimRng::new(seed, 22).range(1_000, 3_000))
    }

    /// In seeds with observers, from a stream of their own (label 22): 1 in
    /// 3 start them before the queue's path exists (every other session
    /// connects 1–3 s late), and 1 in 3 (independently) wipe the queue once
    /// to three times while they watch (`Fault::WipeElection`: every node,
    /// then the path; not next to Curator's models, which a wiped election
    /// strands).
    fn observers_through_absence(&mut self, seed: u64) {
        if self.env.hosting.observers.is_empty() {
            return;
        }
        let mut rng = SimRng::new(seed, 22);
        let late = Self::late_start_of(seed);
        rng.range(1_000, 3_000);
        if rng.chance(1.0 / 3.0) {
            self.env.late_start = Some(late);
        }
        let wipes = rng.chance(1.0 / 3.0);
        let curator = self.env.library() == Some(Scheme::Curator);
        if wipes && !curator {
            let chaos = self.chaos.as_millis() as u64;
            for _ in 0..rng.range(1, 3) {
                let at = Timestamp::from_millis(rng.range(500, chaos.saturating_sub(500).max(500)));
                self.plan.push((at, Fault::WipeElection));
            }
            self.plan.sort_by_key(|(t, _)| *t);
        }
    }

    /// The queue becomes `queue` with `k` holders (1 for a mutex or a
    /// read-write lock). Foreign models are election models: other queues
    /// have none (spawns of them become zkelect spawns); an interop scheme
    /// stays where the core accepts it (k = 1 and a stem for the recipe),
    /// else the candidates use their own names.
    pub fn with_queue(mut self, queue: Queue, k: u32) -> Self {
        self.set_queue(queue, k);
        self
    }

    /// [`with_queue`](Self::with_queue) in place.
    pub fn set_queue(&mut self, queue: Queue, k: u32) {
        let k = match queue {
            Queue::Mutex | Queue::ReadWrite { .. } => 1,
            Queue::Election | Queue::Semaphore => k.max(1),
        };
        self.leaders = k;
        self.env.queue = queue;
        if queue != Queue::Election || k != 1 {
            self.env.foreign = 0;
            for (_, fault) in &mut self.plan {
                if *fault == Fault::SpawnForeign {
                    *fault = Fault::Spawn;
                }
            }
        }
        let interop = self.env.interop.interop();
        let recipe = queue.recipe(k);
        if k > 1 || recipe.stems(interop).is_empty() {
            self.env.interop = Scheme::Ours;
        }
    }

    /// The core's recipe of the queue.
    pub fn recipe(&self) -> Recipe {
        self.env.queue.recipe(self.leaders)
    }

    /// Draws the scenario and its plan from `seed`, as an election (what
    /// every seed drew before the swarm drew locks).
    fn election_from_seed(seed: u64, overrides: Overrides) -> Self {
        let mut rng = SimRng::new(seed, 1);
        let candidates = overrides
            .candidates
            .unwrap_or_else(|| rng.range(1, 20) as usize)
            .max(1);
        let pauses = overrides.faults == FaultMix::WithPauses;
        // Fencing is checked against one leader at a time.
        let leaders = if pauses {
            1
        } else {
            overrides.leaders.unwrap_or_else(|| rng.range(1, 2) as u32)
        };
        let session_timeout = Duration::from_millis(rng.range(20, 60) * 100);
        let env = Env::draw(seed, leaders, session_timeout);
        let mut side = SimRng::new(seed, 5);
        let library = env.library();
        let lookalike_schemes = env.lookalike_schemes();
        // Curator's watcher acts on `NodeDeleted` only and never sets its watch
        // again, and drops a listing answered `NoNode`: a data change on the node
        // it watches, or a wiped election, strands it for good. Not drawn next
        // to it.
        let curator = library == Some(Scheme::Curator);
        let policy = if rng.chance(0.3) {
            ConnectionPolicy::SessionAware
        } else {
            ConnectionPolicy::Standard
        };
        let chaos = Duration::from_millis(rng.range(10, 30) * 1_000);
        let reorder = overrides.faults != FaultMix::None && rng.chance(0.5);
        let t = session_timeout.as_millis() as u64;
        let mut plan = Vec::new();
        let faults = overrides.faults != FaultMix::None;
        // Per-second rates of each kind, themselves drawn so that some seeds are calm and some stormy.
        let rate = |rng: &mut SimRng, max: u64| rng.range(0, max) as f64 / 100.0;
        let drop = rate(&mut rng, 40);
        let partition = rate(&mut rng, 25);
        let crash = rate(&mut rng, 5);
        let restart = rate(&mut rng, 4);
        let pause = if pauses { rate(&mut rng, 25) } else { 0.0 };
        let churn = rate(&mut rng, 30);
        let revoke = rate(&mut rng, 8);
        let touch = rate(&mut rng, 8);
        let delay = rate(&mut rng, 20);
        let lag = if overrides.faults == FaultMix::WithEventLag {
            rate(&mut rng, 30)
        } else if pauses {
            // Pauses together with lagging events, 1 in 2 pause seeds (from
            // a stream of their own, so the others stay as they were).
            let mut both = SimRng::new(seed, 12);
            if both.chance(0.5) {
                rate(&mut both, 30)
            } else {
                0.0
            }
        } else {
            0.0
        };
        let lookalike = side.range(0, 5) as f64 / 100.0;
        let mut population = candidates + env.foreign;
        // Drops aimed at the moments creates are in flight (start, spawn, rejoin):
        // that is when a lost reply can leave an orphan node behind.
        let aimed =
            |rng: &mut SimRng, plan: &mut Vec<(Timestamp, Fault)>, at: Timestamp, pid: usize| {
                if faults && rng.chance(0.4) {
                    let at = at + Duration::from_millis(rng.range(3, 60));
                    plan.push((
                        at,
                        Fault::DropConnection {
                            pid,
                            applied: rng.chance(0.7),
                        },
                    ));
                }
            };
        for pid in 0..candidates {
            aimed(&mut rng, &mut plan, Timestamp::ZERO, pid);
        }
        for pid in candidates..population {
            aimed(&mut side, &mut plan, Timestamp::ZERO, pid);
        }
        for second in 0..chaos.as_secs() {
            let at = |rng: &mut SimRng| Timestamp::from_millis(second * 1_000 + rng.range(0, 999));
            let pick = |rng: &mut SimRng, n: usize| rng.range(0, n as u64 - 1) as usize;
            if faults {
                if rng.chance(drop) {
                    let applied = rng.chance(0.5);
                    plan.push((
                        at(&mut rng),
                        Fault::DropConnection {
                            pid: pick(&mut rng, population),
                            applied,
                        },
                    ));
                }
                if rng.chance(partition) {
                    let ms = rng.range(t / 4, t * 2);
                    plan.push((
                        at(&mut rng),
                        Fault::Partition {
                            pid: pick(&mut rng, population),
                            ms,
                        },
                    ));
                }
                if rng.chance(crash) {
                    plan.push((
                        at(&mut rng),
                        Fault::Crash {
                            pid: pick(&mut rng, population),
                        },
                    ));
                }
                if rng.chance(restart) {
                    plan.push((
                        at(&mut rng),
                        Fault::RestartServer {
                            ms: rng.range(100, t / 2),
                        },
                    ));
                }
                if rng.chance(partition / 2.0) {
                    let fault = match rng.range(0, if pauses { 3 } else { 2 }) {
                        0 => Fault::CrashLeader,
                        1 => Fault::PartitionLeader {
                            ms: rng.range(t / 2, t * 2),
                        },
                        2 => Fault::CloseLeader,
                        _ => Fault::PauseLeader {
                            ms: rng.range(t / 2, t * 2),
                        },
                    };
                    plan.push((at(&mut rng), fault));
                }
                if rng.chance(revoke) {
                    let fault = match rng.range(0, 9) {
                        0..=4 => Fault::RevokeLeader,
                        5..=8 => Fault::Revoke {
                            pid: pick(&mut rng, population),
                        },
                        _ if curator => Fault::RevokeLeader,
                        _ => Fault::WipeElection,
                    };
                    plan.push((at(&mut rng), fault));
                }
                if rng.chance(partition / 2.0) {
                    let fault = Fault::PartitionOneWay {
                        pid: pick(&mut rng, population),
                        ms: rng.range(t / 4, t * 2),
                        to_server: rng.chance(0.5),
                    };
                    plan.push((at(&mut rng), fault));
                }
                if rng.chance(touch) {
                    let pid = pick(&mut rng, population);
                    if !curator {
                        plan.push((at(&mut rng), Fault::TouchData { pid }));
                    }
                }
                // Lagging events matter most when node names come back: after
                // the election's parent is recreated, sequences restart.
                if rng.chance(lag / 4.0) && !curator {
                    plan.push((at(&mut rng), Fault::WipeElection));
                }
                if side.chance(lookalike) {
                    let i = side.range(0, lookalike_schemes.len() as u64 - 1) as usize;
                    let at = Timestamp::from_millis(second * 1_000 + side.range(0, 999));
                    let scheme = lookalike_schemes[i];
                    plan.push((at, Fault::Lookalike { scheme }));
                }
                if rng.chance(lag) {
                    let fault = Fault::LagEvents {
                        pid: pick(&mut rng, population),
                        ms: rng.range(t / 2, t * 3),
                    };
                    plan.push((at(&mut rng), fault));
                }
                if rng.chance(delay) {
                    let fault = Fault::Delay {
                        pid: pick(&mut rng, population),
                        ms: rng.range(t / 4, t * 2),
                        extra_ms: rng.range(10, t / 4),
                    };
                    plan.push((at(&mut rng), fault));
                }
                // A paused leader is what the fenced resource is for: aim some pauses at it.
                if rng.chance(pause / 2.0) {
                    let ms = rng.range(t / 2, t * 2);
                    plan.push((at(&mut rng), Fault::PauseLeader { ms }));
                }
                if rng.chance(pause) {
                    let ms = rng.range(t / 4, t * 2);
                    plan.push((
                        at(&mut rng),
                        Fault::Pause {
                            pid: pick(&mut rng, population),
                            ms,
                        },
                    ));
                }
            }
            if rng.chance(churn) {
                let when = at(&mut rng);
                let fault = match rng.range(0, 3) {
                    0 => {
                        let pid = pick(&mut rng, population);
                        let rejoin = rng.chance(0.7);
                        if rejoin {
                            aimed(&mut rng, &mut plan, when, pid);
                        }
                        Fault::Resign { pid, rejoin }
                    }
                    1 => Fault::Close {
                        pid: pick(&mut rng, population),
                    },
                    _ => {
                        aimed(&mut rng, &mut plan, when, population);
                        population += 1;
                        if library.is_some() && side.chance(0.5) {
                            Fault::SpawnForeign
                        } else {
                            Fault::Spawn
                        }
                    }
                };
                plan.push((when, fault));
            }
        }
        plan.sort_by_key(|(t, _)| *t);
        Self {
            candidates,
            leaders,
            session_timeout,
            policy,
            chaos,
            reorder,
            pauses,
            plan,
            env,
        }
    }
}

/// Settings the seed draws for the world besides the [`Swarm`] (kept apart so
/// that a hand-built `Swarm`, as the demo builds one, stays as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knobs {
    /// The `cversion` new nodes start with: near 2^31 for one seed in seven, so
    /// sequence numbers wrap to negative ones during the run.
    pub cversion_start: i32,
    /// Whether the election's parent is a container node (removed by the server
    /// when its last child goes, created again by the next candidate).
    pub container_parent: bool,
    /// The ACL of the candidates' nodes and the identities of the sessions.
    pub acl: AclDraw,
    /// Whether the client library reports the session id on connecting (the Java
    /// client does; zookeeper-async does not, and the core then learns it from
    /// its node's `ephemeralOwner`).
    pub session_ids: bool,
    /// The other `ConfigBuilder` options ([`Options::draw`]; the defaults in
    /// canary runs, whose hazards were shaped without them).
    pub options: Options,
}

impl Knobs {
    /// Draws the knobs for `seed` (from a stream of their own, so adding a knob
    /// does not change the scenario a seed picks); with `wrap` the sequence
    /// counter always starts near 2^31 (a canary that needs it,
    /// [`Canary::wants_wrap`](crate::canary::Canary::wants_wrap)).
    pub fn from_seed(seed: u64, wrap: bool) -> Self {
        let mut rng = SimRng::new(seed, 3);
        let wrap = rng.chance(1.0 / 7.0) || wrap;
        let near = rng.range(0, 30) as i32;
        let mut knobs = Self {
            cversion_start: if wrap { i32::MAX - near } else { 0 },
            container_parent: rng.chance(0.25),
            acl: if rng.chance(0.25) {
                AclDraw::CreatorAllWorldRead
            } else {
                AclDraw::Open
            },
            session_ids: rng.chance(0.7),
            options: Options::draw(seed),
        };
        // Drawn last, so every earlier draw of a seed stays put: 1 in 5 of
        // the open seeds take a custom list instead.
        if knobs.acl == AclDraw::Open && rng.chance(0.2) {
            knobs.acl = if rng.chance(0.5) {
                AclDraw::Digests {
                    users: rng.range(1, 4) as u8,
                }
            } else {
                AclDraw::Ip
            };
        }
        knobs
    }
}

impl fmt::Display for Knobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cversion_start={} container_parent={} acl={:?} session_ids={} {}",
            self.cversion_start, self.container_parent, self.acl, self.session_ids, self.options
        )
    }
}

/// The ACL a seed gives the queue's nodes, and so who its sessions
/// authenticate as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclDraw {
    /// `world:anyone:cdrwa`; no session authenticates.
    Open,
    /// The creator may do anything, everyone may read; every session
    /// authenticates as the same service identity.
    CreatorAllWorldRead,
    /// A custom list ([`Acl::Custom`]): one `digest` entry with every
    /// permission per user, and `world:anyone:r`; process `p` authenticates
    /// as user `p % users` (operators as user 0).
    Digests {
        /// How many digest users (1–3).
        users: u8,
    },
    /// A custom list of one `ip` entry, `ip:127.0.0.0/8:cdrwa`: no session
    /// authenticates; every client connects from 127.0.0.1.
    Ip,
}

impl AclDraw {
    /// The digest id of user `n`: `u<n>:` and a base64 SHA-1 digest (made
    /// up, but of the form the server stores).
    fn digest_id(n: usize) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut x = (n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut hash: String = (0..26)
            .map(|_| {
                x = x.rotate_left(7).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                ALPHABET[(x >> 58) as usize] as char
            })
            .collect();
        // The last character carries two bits past the digest: zero.
        hash.push('A');
        hash.push('=');
        format!("u{n}:{hash}")
    }

    /// The list the candidates create their nodes with.
    pub fn acl(self) -> Acl {
        match self {
            Self::Open => Acl::Open,
            Self::CreatorAllWorldRead => Acl::CreatorAllWorldRead,
            Self::Digests { users } => {
                let mut list: Vec<AclEntry> = (0..usize::from(users))
                    .filter_map(|n| AclEntry::new("digest", &Self::digest_id(n), Perms::ALL).ok())
                    .collect();
                list.push(AclEntry::anyone(Perms::READ));
                Acl::Custom(list)
            }
            Self::Ip => Acl::Custom(
                AclEntry::new("ip", "127.0.0.0/8", Perms::ALL)
                    .into_iter()
                    .collect(),
            ),
        }
    }

    /// The identity process `pid`'s sessions authenticate as (`scheme:id`),
    /// if any; `None` for `pid` means an operator's session.
    pub fn identity(self, pid: Option<usize>) -> Option<String> {
        match self {
            Self::Open | Self::Ip => None,
            Self::CreatorAllWorldRead => Some(IDENTITY.to_owned()),
            Self::Digests { users } => {
                let n = pid.unwrap_or(0) % usize::from(users.max(1));
                Some(format!("digest:{}", Self::digest_id(n)))
            }
        }
    }
}

/// The identity every session authenticates as when the candidates' ACL is
/// the creator's.
pub const IDENTITY: &str = "digest:svc";

/// The `ConfigBuilder` options a seed draws besides the rule, the policy, the
/// interop scheme, the ACL and the container parent: drawn from a
/// stream of their own ([`Options::draw`]), so the rest of the scenario stays
/// put; `Options::default()` is what every seed ran before.
///
/// Some are the queue's (every process must agree: a prefix, whether the
/// path exists before anyone joins, the retry delays); the others are drawn
/// per process ([`Options::process`]), so one queue mixes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The node-name prefix of every zkelect process (`None`: the rule's stem).
    /// Applied only where the core takes one: without interop and outside a
    /// read-write lock, whose stems are fixed.
    pub prefix: Option<&'static str>,
    /// `create_parents`: when false the world creates the election path
    /// before anyone joins (and an operator's wipe creates it again), as an
    /// operator of such a deployment must.
    pub create_parents: bool,
    /// How many in a hundred processes watch the parent
    /// (`WatchStrategy::Parent`), by a hash of seed and pid.
    pub parent: u8,
    /// How many in a hundred processes run with `leader_marker(false)`.
    pub no_marker: u8,
    /// How many in a hundred processes run with `rejoin_on_revoke(false)`:
    /// revoked, they stay out (idle) for good.
    pub no_rejoin: u8,
    /// Bytes of application data (`data`) each process stores after its id.
    pub data: u16,
    /// `backoff(min, max)`, in milliseconds.
    pub backoff: (u64, u64),
}

impl Default for Options {
    fn default() -> Self {
        Self {
            prefix: None,
            create_parents: true,
            parent: 0,
            no_marker: 0,
            no_rejoin: 0,
            data: 0,
            backoff: (50, 2_000),
        }
    }
}

/// What [`Options::process`] draws for one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessOptions {
    /// Which node it watches.
    pub strategy: WatchStrategy,
    /// `leader_marker`.
    pub leader_marker: bool,
    /// `rejoin_on_revoke`.
    pub rejoin_on_revoke: bool,
}

impl Options {
    /// The prefixes a seed may draw (`n_` is an election's own stem, and
    /// another recipe's prefix then).
    pub const PREFIXES: [&'static str; 4] = ["cand-", "x", "member_", "n_"];

    /// Draws the options for `seed` from a stream of their own: a prefix 1 in
    /// 4 seeds; the path created by the world (`create_parents(false)`) 1 in
    /// 5; the `Parent` strategy for 25, 50 or 100 % of processes 1 in 4;
    /// `leader_marker(false)` for 50 or 100 % 1 in 4; `rejoin_on_revoke(false)`
    /// for 30 or 100 % 1 in 4; 1–2,048 bytes of data 1 in 3; retry delays
    /// from 1, 10, 100 or 500 ms up to 0.5, 2 or 5 s 1 in 3 (else 50 ms – 2 s).
    pub fn draw(seed: u64) -> Self {
        let mut rng = SimRng::new(seed, 10);
        let mut o = Self::default();
        if rng.chance(0.25) {
            o.prefix = Some(Self::PREFIXES[rng.range(0, 3) as usize]);
        }
        o.create_parents = !rng.chance(0.2);
        if rng.chance(0.25) {
            o.parent = [25, 50, 100][rng.range(0, 2) as usize];
        }
        if rng.chance(0.25) {
            o.no_marker = [50, 100][rng.range(0, 1) as usize];
        }
        if rng.chance(0.25) {
            o.no_rejoin = [30, 100][rng.range(0, 1) as usize];
        }
        if rng.chance(1.0 / 3.0) {
            o.data = rng.range(1, 2_048) as u16;
        }
        if rng.chance(1.0 / 3.0) {
            let min = [1, 10, 100, 500][rng.range(0, 3) as usize];
            let max = [500, 2_000, 5_000][rng.range(0, 2) as usize];
            o.backoff = (min, max.max(min));
        }
        o
    }

    /// The longest retry delay.
    pub fn backoff_max(&self) -> Duration {
        Duration::from_millis(self.backoff.1)
    }

    /// What process `pid` of `seed`'s world draws (a hash of seed and pid,
    /// so a spawned process draws too).
    pub fn process(&self, seed: u64, pid: usize) -> ProcessOptions {
        let mut rng = SimRng::new(seed ^ (pid as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15), 11);
        let mut below = |percent: u8| rng.range(0, 99) < u64::from(percent);
        ProcessOptions {
            strategy: if below(self.parent) {
                WatchStrategy::Parent
            } else {
                WatchStrategy::Predecessor
            },
            leader_marker: !below(self.no_marker),
            rejoin_on_revoke: !below(self.no_rejoin),
        }
    }

    /// `builder` with these options for process `pid` of `seed`'s world
    /// (`rule` its rule, `interop` whether it names its nodes in another
    /// library's scheme: then no prefix).
    pub fn configure(
        &self,
        mut builder: ConfigBuilder,
        seed: u64,
        pid: usize,
        rule: Rule,
        interop: bool,
    ) -> ConfigBuilder {
        let p = self.process(seed, pid);
        builder = builder
            .strategy(p.strategy)
            .leader_marker(p.leader_marker)
            .rejoin_on_revoke(p.rejoin_on_revoke)
            .create_parents(self.create_parents)
            .backoff(
                Duration::from_millis(self.backoff.0),
                Duration::from_millis(self.backoff.1),
            );
        if let Some(prefix) = self.prefix {
            if !interop && !matches!(rule, Rule::Read | Rule::Write) {
                builder = builder.prefix(prefix);
            }
        }
        if self.data > 0 {
            // Any bytes, a newline included: only the id's first `\n` splits.
            let data = data_bytes(seed, self.data);
            builder = builder.data(data);
        }
        builder
    }
}

impl fmt::Display for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "prefix={} create_parents={} parent={}% no_marker={}% no_rejoin={}% data={}B backoff={}..{}ms",
            self.prefix.unwrap_or("-"),
            self.create_parents,
            self.parent,
            self.no_marker,
            self.no_rejoin,
            self.data,
            self.backoff.0,
            self.backoff.1
        )
    }
}

/// A process's node data: byte i is (seed + 7·i) mod 251. Stepped rather
/// than divided per byte (the division was most of configuring a spawn),
/// unless the sum would wrap, where the two differ.
fn data_bytes(seed: u64, len: u16) -> Vec<u8> {
    if seed.checked_add(u64::from(len) * 7).is_none() {
        // Truncation intended: the value is below 251.
        return (0..len)
            .map(|i| (seed.wrapping_add(u64::from(i) * 7) % 251) as u8)
            .collect();
    }
    let mut r = seed % 251;
    (0..len)
        .map(|_| {
            // Truncation intended: r < 251.
            let b = r as u8;
            r += 7;
            if r >= 251 {
                r -= 251;
            }
            b
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::data_bytes;

    /// The stepped bytes are the formula's, near the wrap too.
    #[test]
    fn data_bytes_match_the_formula() {
        for seed in [
            0,
            1,
            250,
            251,
            12_345,
            u64::MAX - 7 * 300,
            u64::MAX - 5,
            u64::MAX,
        ] {
            for len in [0u16, 1, 40, 300] {
                let want: Vec<u8> = (0..len)
                    .map(|i| (seed.wrapping_add(u64::from(i) * 7) % 251) as u8)
                    .collect();
                assert_eq!(data_bytes(seed, len), want, "seed {seed} len {len}");
            }
        }
    }
}
