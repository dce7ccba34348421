//! What checkers read of a world: one read-only [`View`], and a
//! [`Process`] of it per simulated process. Checkers see nothing else of
//! the world (its event queue, links, choices and trace are the engine's).

use std::time::Duration;

use zkelect_core::name::Access;
use zkelect_core::{
    Candidate, Config, FencingToken, Recipe, Request, SessionId, Timestamp, Traffic, WatchEvent,
};

use crate::canary::Canary;
use crate::foreign::Scheme;
use crate::server::Server;
use crate::swarm::{ChrootRoot, Knobs, Swarm};
use crate::zk::ZkModel;

use super::agent::Agent;
use super::census::{Census, Counts};
use super::proc::{agent, revoked, Proc};
use super::spec::{Phase, QueueSpec, PATH};
use super::stats::RunStats;

/// A read-only view of one simulated process, for checkers.
#[derive(Debug, Clone, Copy)]
pub struct Process<'a> {
    /// Its index.
    pub pid: usize,
    /// What it runs: a zkelect machine on its session (or one that left
    /// it), or a foreign model.
    pub agent: Agent<'a>,
    /// The zkelect candidate, while it runs.
    pub candidate: Option<&'a Candidate>,
    /// A zkelect candidate's configuration (also once it stopped).
    pub config: Option<&'a Config>,
    /// Which other library it models, if it is not zkelect.
    pub foreign: Option<Scheme>,
    /// It is an observer (no node; never a contender).
    pub observer: bool,
    /// The queue it is a machine of ([`View::queues`]; 0 is the swarm's).
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
    /// Its client's current ZooKeeper session.
    pub session_id: Option<SessionId>,
    /// Its client was closed and its session with it.
    pub session_closed: bool,
    /// Its session's negotiated timeout (the requested one before the first).
    pub session_timeout: Duration,
    /// When an operator deleted the node the process still believes is its own
    /// (`None` once it learned, or if it never happened). A foreign model never
    /// learns: its recipe does not watch its own node.
    pub revoked_at: Option<Timestamp>,
    /// The last moment that deletion could not have reached it: when the
    /// member of the ensemble its session is on had not applied it yet (a
    /// lagging follower still shows the node, answers as if it stood, and
    /// fires its watch only once it applies it), else the deletion itself.
    pub revoke_reached: Option<Timestamp>,
    /// How many permits it asks for: its drawn weight in a semaphore, 1
    /// otherwise (what `safety` counts it as).
    pub weight: u32,
    /// It was drawn revocable.
    pub revocable: bool,
    /// A revocation request written into its node while it held (the node,
    /// and when), not yet heard.
    pub asked: Option<(&'a str, Timestamp)>,
}

/// What the checkers read of a world: its processes, queues, server, clock,
/// phase and counts. A [`World`](super::World) derefs to its view, so tests
/// and tools read a world the same way.
pub struct View {
    pub(super) seed: u64,
    pub(super) swarm: Swarm,
    pub(super) knobs: Knobs,
    pub(super) now: Timestamp,
    pub(super) zk: Server,
    pub(super) procs: Vec<Proc>,
    /// The queues: the swarm's, then its side queues.
    pub(super) queues: Vec<QueueSpec>,
    /// The pids whose node an operator once deleted, ascending (checked after
    /// every step: kept, not searched for).
    pub(super) revoked: Vec<usize>,
    /// Nodes an operator deleted before their owners knew them (the
    /// create's answer still on its way): (name, czxid, when, the zxid of
    /// the deletion). The owner is revoked when it learns its node.
    pub(super) unclaimed: Vec<(String, i64, Timestamp, i64)>,
    /// Per queue, the highest token its fenced resource accepted (each
    /// queue guards a resource of its own).
    pub(super) resource_max: Vec<Option<FencingToken>>,
    pub(super) heal_at: Timestamp,
    pub(super) phase: Phase,
    pub(super) stats: RunStats,
    /// The persistent look-alikes' names (not leaks, and no process's).
    pub(super) lookalikes: Vec<String>,
    /// Those of the side queues, as whole paths.
    pub(super) side_lookalikes: Vec<String>,
    /// The checkers' counts, kept as processes change.
    pub(super) counts: Counts,
    /// The multi-locks.
    pub(super) groups: Vec<Group>,
    /// The session whose credentials the server refused, once it has
    /// ([`Refusal`](crate::swarm::Refusal)).
    pub(super) refused: Option<Refused>,
    /// The downgraded writer's node whose ACL an operator changed, once
    /// one did ([`AclChange`](crate::swarm::AclChange)).
    pub(super) acl_changed: Option<AclChanged>,
    /// The sessions whose credentials zookeeper-async could not replay
    /// within the replay's bound (the core's `SetUp` machine ended in
    /// `ReplayTimedOut`: a pause or a cut link outlasted it), as they ended.
    pub(super) lapsed: Vec<Refused>,
    /// How many replays of credentials after a reconnect put them back.
    pub(super) replayed: usize,
    /// The first start-up that broke its contract, or bound reported above
    /// the session's (`start-up`).
    pub(super) start_up: Option<String>,
}

/// A downgraded writer's node whose ACL an operator set to `world:anyone`
/// READ only, and whose mark the operator then wrote over
/// ([`AclChange`](crate::swarm::AclChange)), as it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclChanged {
    /// The writer.
    pub pid: usize,
    /// Its node (the whole path).
    pub path: String,
    /// When.
    pub at: Timestamp,
}

/// A session whose credentials the server refused at a reconnect
/// ([`Refusal`](crate::swarm::Refusal)), as it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The session's host.
    pub host: usize,
    /// The ZooKeeper session (the server keeps it).
    pub session: SessionId,
    /// When the client reported `AuthFailed`.
    pub at: Timestamp,
}

impl View {
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

    /// The queue process `pid` is in ([`Process::queue`]), without building
    /// its whole view: the checkers of events ask it of every notice.
    pub fn queue_of(&self, pid: usize) -> usize {
        self.procs[pid].queue
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

    pub(super) fn path_of(&self, pid: usize) -> &str {
        &self.queues[self.procs[pid].queue].path
    }

    /// One process. Panics if `pid` is out of range.
    pub fn process(&self, pid: usize) -> Process<'_> {
        let p = &self.procs[pid];
        let h = &self.procs[p.host];
        let agent = agent(&self.procs, pid);
        let revoked = revoked(&self.procs, pid);
        Process {
            pid,
            agent,
            candidate: agent.candidate(),
            config: p.config.as_deref(),
            foreign: agent.foreign(),
            observer: p.observer,
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
            session_id: h.session_id,
            session_closed: h.session_closed,
            session_timeout: h.timeout,
            revoked_at: revoked.map(|r| r.at),
            revoke_reached: revoked.map(|r| r.reached),
            weight: p.weight,
            revocable: p.revocable,
            asked: p.asked.as_ref().map(|(node, at)| (node.as_str(), *at)),
        }
    }

    /// Moves [`Process::revoke_reached`] of every process that still
    /// believes in a node an operator deleted to now while the member its
    /// session is on has not applied the deletion (after every step of a
    /// run on an ensemble: one server applies it at once).
    pub(super) fn revocations_behind(&mut self) {
        let Some(ensemble) = self.zk.ensemble() else {
            return;
        };
        // A deletion every member has applied leaves no one behind: most
        // steps look up no session's member.
        let slowest = ensemble.slowest_zxid();
        for i in 0..self.revoked.len() {
            let pid = self.revoked[i];
            if self.procs[pid]
                .revoked
                .as_ref()
                .is_some_and(|r| r.zxid > slowest)
            {
                self.revoked_behind(pid);
            }
        }
    }

    /// [`Self::revocations_behind`] for process `pid`.
    pub(super) fn revoked_behind(&mut self, pid: usize) {
        let Some(ensemble) = self.zk.ensemble() else {
            return;
        };
        // The cheap tests first (this runs after every step): whether the
        // member is behind the deletion, and only then whether the process
        // still believes in the deleted node (which compares its name).
        let Some(zxid) = self.procs[pid].revoked.as_ref().map(|r| r.zxid) else {
            return;
        };
        let session = self.procs[self.procs[pid].host].session_id;
        let behind = session
            .and_then(|s| self.zk.member_of(s))
            .is_some_and(|m| ensemble.last_zxid(m) < zxid);
        if behind && revoked(&self.procs, pid).is_some() {
            if let Some(r) = self.procs[pid].revoked.as_mut() {
                r.reached = self.now;
            }
        }
    }

    /// The requests of process `pid`'s machine as its session counts them
    /// (sent, errors, the ones its session answered `OperationTimeout`),
    /// while it is on its session.
    pub fn traffic(&self, pid: usize) -> Option<Traffic> {
        let id = self.procs[pid].machine_id()?;
        self.procs[self.procs[pid].host]
            .session
            .as_ref()?
            .traffic(id)
    }

    /// The requests the process's client has sent on its current connection
    /// and not yet answered, oldest first.
    pub fn requests_in_flight(&self, pid: usize) -> impl Iterator<Item = &Request> + '_ {
        self.procs[self.procs[pid].host]
            .on_wire
            .values()
            .filter(move |sent| sent.from == Some(pid))
            .map(|sent| &*sent.request)
    }

    /// The downgraded writer's node whose ACL an operator changed, once one
    /// did ([`AclChange`](crate::swarm::AclChange)).
    pub fn acl_changed(&self) -> Option<&AclChanged> {
        self.acl_changed.as_ref()
    }

    /// The session whose credentials the server refused, once it has.
    pub fn refused(&self) -> Option<Refused> {
        self.refused
    }

    /// How many times zookeeper-async put a session's credentials back on
    /// a new connection (the core's `SetUp` replay ended `Done`).
    pub fn replayed(&self) -> usize {
        self.replayed
    }

    /// The first start-up that broke its contract, or the first session
    /// timeout a zookeeper-async host reported above the one its session
    /// runs by on the member it is on.
    pub fn start_up_violation(&self) -> Option<&str> {
        self.start_up.as_deref()
    }

    /// The sessions whose credentials could not be replayed after a
    /// reconnect within the replay's bound, in order.
    pub fn lapsed(&self) -> &[Refused] {
        &self.lapsed
    }

    /// Whether process `pid` runs on a session whose credentials the server
    /// refused, or could not be replayed in time (already).
    pub fn on_refused_session(&self, pid: usize) -> bool {
        self.procs.get(pid).is_some_and(|p| {
            self.refused
                .iter()
                .chain(&self.lapsed)
                .any(|r| p.host == r.host)
        })
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
            .filter(|&pid| agent(&self.procs, pid).role().is_leader())
            .map(|pid| self.process(pid))
    }

    /// The processes of queue `q` that believe they lead right now and have
    /// not crashed, in pid order: the safety checker's full count, which
    /// builds a view of only these. They are read from the census (kept
    /// exact after every step), and the walk stops at the last of them.
    pub fn live_leaders_of(&self, q: usize) -> impl Iterator<Item = Process<'_>> + '_ {
        (0..self.procs.len())
            .filter(move |&pid| self.procs[pid].queue == q && self.counts.leads(pid))
            .take(self.counts.per_queue[q].leading)
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
                let a = agent(&self.procs, pid);
                a.foreign().is_none() && a.role().is_leader()
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
        let (mut queue, _) = zkelect_core::name::queue(&names, config.prefix(), interop, recipe);
        // A zkelect writer whose data says it downgraded reads, as its
        // readers behind it judge.
        for node in &mut queue {
            let data = self.zk.zk().data(&format!("{path}/{}", node.name));
            if data.is_some_and(zkelect_core::config::is_downgraded)
                && matches!(node.origin, zkelect_core::name::Origin::Ours { .. })
            {
                node.access = Access::Shared;
            }
        }
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

    /// The processes leading right now (crashed ones excluded).
    pub fn leaders(&self) -> Vec<usize> {
        self.processes()
            .filter(|p| !p.crashed && p.agent.role().is_leader())
            .map(|p| p.pid)
            .collect()
    }

    /// What `canary` may know of process `pid` when it rewrites.
    pub fn canary_view(&self, pid: usize, canary: Canary) -> crate::canary::Known {
        let c = agent(&self.procs, pid);
        let config = self.procs[pid].config.as_deref();
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
        crate::canary::Known {
            scheme: self.queues[self.procs[pid].queue].scheme,
            rule: config.map_or_else(Default::default, |c| c.rule()),
            own,
            prefix: config.map_or_else(String::new, |c| c.prefix().to_owned()),
            watching: c.watching().map(|name| name.to_string()),
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
    ///
    /// A waiter under the two-watch takeover watches one node more, below
    /// its k nearest: `no-herd` allows one more reader where one of those
    /// it counts runs it.
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

    /// How many machines run on host `h`'s session.
    pub fn machines_on(&self, h: usize) -> usize {
        self.procs.get(h).map_or(0, |p| p.machines.len())
    }

    /// How many times a process changed in a way the census sees (a checker
    /// whose verdict rests on nothing else may reuse it while this stays).
    pub fn generation(&self) -> u64 {
        self.counts.generation
    }

    /// The counts the per-step checkers read, as of now, over every queue.
    pub fn census(&self) -> Census {
        self.counts.census
    }

    /// The same counts over queue `q`'s machines only (each checker judges
    /// each queue on its own).
    pub fn queue_census(&self, q: usize) -> Census {
        self.counts.per_queue[q]
    }

    /// Counts process `pid` again, with the machines on its session.
    pub(super) fn recount(&mut self, pid: usize) {
        self.counts.recount(&self.procs, &self.zk, pid);
    }

    /// Counts machine `pid` alone again.
    pub(super) fn recount_one(&mut self, pid: usize) {
        self.counts.recount_one(&self.procs, &self.zk, pid);
    }

    /// Debug builds: the kept counts equal a full scan.
    pub(super) fn check_census(&self) {
        self.counts.check(&self.procs, &self.zk);
    }
}

/// One multi-lock of the world.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// The process whose session runs it.
    pub(crate) host: usize,
    /// Its name on that session.
    pub(crate) gid: zkelect_core::GroupId,
    /// Its parts' processes, in the lock's order.
    pub(crate) parts: Vec<usize>,
    /// How long an acquisition tries.
    pub(crate) give_up: Option<Duration>,
}
