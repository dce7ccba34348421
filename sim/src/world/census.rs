//! The census: counts over every process that the per-step checkers read,
//! kept up to date as processes change instead of scanned after every step
//! (a swarm runs up to twenty processes, and a scan per step was most of a
//! checker's cost).
//!
//! A process changes only when its agent handles something (always followed
//! by `World::after`), when a fault crashes or revokes it, or when the
//! server ends its session; each of those recounts that one process (with the
//! machines on its session). Debug builds (every test) compare the counts
//! with a full scan after every step.

use zkelect_core::name::Access;
use zkelect_core::{Role, Rule};

use super::proc::{agent, revoked_at, Proc};
use crate::server::Server;

/// Counts over every process, for the checkers' fast paths
/// ([`View::census`](super::View::census)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Census {
    /// Not crashed and believing it leads (revoked ones too): what
    /// [`Safety`](crate::check::Safety) counts is some of these.
    pub leading: usize,
    /// Of those, the ones whose node is exclusive (any but a reader's, or
    /// a writer's that downgraded: their own belief).
    pub leading_exclusive: usize,
    /// Of those, the permits they were drawn to ask for, summed (their
    /// number, but in a weighted semaphore).
    pub leading_weight: usize,
    /// Zkelect candidates drawn revocable that hold a node into which a
    /// revocation request was written and have not heard it yet (what
    /// [`RevocationHeard`](crate::check::RevocationHeard) looks at).
    pub asked: usize,
    /// Of those, the zkelect candidates whose node an operator deleted (what
    /// [`Revocation`](crate::check::Revocation) looks at).
    pub leading_revoked: usize,
    /// Live as [`Liveness`](crate::check::Liveness) means it: not crashed,
    /// not an observer, not a foreign model whose node an operator deleted,
    /// and joined (not idle, closed or failed).
    pub live: usize,
    /// Live and believing it leads.
    pub live_leading: usize,
    /// Live, not leading, with a node of its own (waiting in the queue).
    pub waiting: usize,
    /// Gone as [`NoLeaks`](crate::check::NoLeaks) means it: its session
    /// closed, or crashed with its session gone from the server.
    pub gone: usize,
}

impl Census {
    fn plus(self, o: Self) -> Self {
        Self {
            leading: self.leading + o.leading,
            leading_exclusive: self.leading_exclusive + o.leading_exclusive,
            leading_weight: self.leading_weight + o.leading_weight,
            asked: self.asked + o.asked,
            leading_revoked: self.leading_revoked + o.leading_revoked,
            live: self.live + o.live,
            live_leading: self.live_leading + o.live_leading,
            waiting: self.waiting + o.waiting,
            gone: self.gone + o.gone,
        }
    }

    fn minus(self, o: Self) -> Self {
        Self {
            leading: self.leading - o.leading,
            leading_exclusive: self.leading_exclusive - o.leading_exclusive,
            leading_weight: self.leading_weight - o.leading_weight,
            asked: self.asked - o.asked,
            leading_revoked: self.leading_revoked - o.leading_revoked,
            live: self.live - o.live,
            live_leading: self.live_leading - o.live_leading,
            waiting: self.waiting - o.waiting,
            gone: self.gone - o.gone,
        }
    }
}

/// The census as the world keeps it: the counts over every process, per
/// queue, and each process's share of them.
#[derive(Debug, Clone, Default)]
pub(super) struct Counts {
    pub(super) census: Census,
    pub(super) per_queue: Vec<Census>,
    shares: Vec<Census>,
    /// Counts recounts ([`View::generation`](super::View::generation)).
    pub(super) generation: u64,
    /// Counts recounts that changed a process's share, and refused or
    /// lapsed credentials (a version of what a pass that holds until the
    /// counts change reads: `Holds::UntilCountsChange`).
    pub(super) version: u64,
}

impl Counts {
    /// Counts over `queues` queues, with no process yet.
    pub(super) fn new(queues: usize) -> Self {
        Self {
            per_queue: vec![Census::default(); queues],
            ..Self::default()
        }
    }

    /// Debug builds, after every step: the kept counts equal a full scan (a
    /// missed change of a process would otherwise go unseen by the checkers).
    pub(super) fn check(&self, procs: &[Proc], zk: &Server) {
        debug_assert_eq!(
            self.census,
            (0..procs.len())
                .map(|pid| share(procs, zk, pid))
                .fold(Census::default(), Census::plus),
            "the census missed a change of a process"
        );
        for q in 0..self.per_queue.len() {
            debug_assert_eq!(
                self.per_queue[q],
                (0..procs.len())
                    .filter(|&pid| procs[pid].queue == q)
                    .map(|pid| share(procs, zk, pid))
                    .fold(Census::default(), Census::plus),
                "the census of queue {q} missed a change of a process"
            );
        }
    }

    /// Counts process `pid` again after it changed, with every machine on
    /// its session (they share its host's crash, session and close).
    pub(super) fn recount(&mut self, procs: &[Proc], zk: &Server, pid: usize) {
        let host = procs[pid].host;
        self.recount_one(procs, zk, pid);
        for &machine in &procs[host].machines {
            if machine != pid {
                self.recount_one(procs, zk, machine);
            }
        }
    }

    /// Counts machine `pid` alone again (when nothing of its session
    /// changed, only its own agent).
    /// Whether process `pid` leads and has not crashed, as last counted.
    pub(super) fn leads(&self, pid: usize) -> bool {
        self.shares.get(pid).is_some_and(|s| s.leading > 0)
    }

    pub(super) fn recount_one(&mut self, procs: &[Proc], zk: &Server, pid: usize) {
        if self.shares.len() <= pid {
            self.shares.resize(pid + 1, Census::default());
        }
        let share = share(procs, zk, pid);
        self.generation += 1;
        // Most recounts (a reply, a timer) leave the share as it was.
        if share == self.shares[pid] {
            return;
        }
        self.version += 1;
        self.census = self.census.minus(self.shares[pid]).plus(share);
        let q = procs[pid].queue;
        self.per_queue[q] = self.per_queue[q].minus(self.shares[pid]).plus(share);
        self.shares[pid] = share;
    }
}

/// Process `pid`'s share of the census.
fn share(procs: &[Proc], zk: &Server, pid: usize) -> Census {
    // The fields `View::process` would show, read directly (a whole view
    // per recount was a few percent of a run): crash, session and close
    // come from the machine's host.
    let p = &procs[pid];
    let h = &procs[p.host];
    let crashed = h.crashed;
    let agent = agent(procs, pid);
    let foreign = agent.foreign().is_some();
    let revoked = || p.revoked.is_some() && revoked_at(procs, pid).is_some();
    let role = agent.role();
    let leads = role.is_leader();
    // A foreign model holds by a one-leader election.
    // A writer that downgraded reads: its candidate's access says so.
    let rule = p.config.as_ref().map_or(Rule::default(), |c| c.rule());
    let access = agent.candidate().map_or(rule.access(), |c| c.access());
    let exclusive = access == Access::Exclusive;
    let revoked_foreign = foreign && revoked();
    let live = !crashed
        && !p.observer
        && !revoked_foreign
        && !matches!(role, Role::Idle | Role::Closed | Role::Failed);
    let gone = h.session_closed || (crashed && h.session_id.is_none_or(|s| !zk.session_alive(s)));
    Census {
        leading: usize::from(!crashed && leads),
        leading_exclusive: usize::from(!crashed && leads && exclusive),
        leading_weight: if !crashed && leads {
            p.weight as usize
        } else {
            0
        },
        asked: usize::from(!crashed && p.asked.is_some()),
        leading_revoked: usize::from(!crashed && leads && !foreign && revoked()),
        live: usize::from(live),
        live_leading: usize::from(live && leads),
        waiting: usize::from(live && !leads && agent.node().is_some()),
        gone: usize::from(gone),
    }
}
