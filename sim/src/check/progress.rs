//! The queue moves, and no faster than it should: holders are there once
//! the faults stop (`liveness`), a change wakes no herd (`no-herd`), and no
//! session storms the server (`no-storm`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use zkelect_core::{Recipe, Role, Timestamp, WatchStrategy};

use super::belief::{revoked_foreign, rule_of, who};
use crate::invariant::{Event, Holds, Invariant, Kinds};
use crate::world::{Phase, Process, View};

/// Once the faults stop, within [`View::liveness_bound`] there are
/// `min(k, live)` leaders in each queue, and there stay that many until the
/// candidates are closed. Live: not crashed, and joined (not idle, closed or
/// failed); a foreign model counts as any candidate (its own belief), unless
/// an operator deleted its node.
#[derive(Debug, Default)]
pub struct Liveness {
    /// Per read-write queue: the live processes' node names (pid order) the
    /// rule was last applied to, and the names it says must hold:
    /// read-write runs check after every settled step, and the queue rarely
    /// changes between two steps.
    must: BTreeMap<usize, (Vec<String>, Vec<String>)>,
    /// The world's [`generation`](World::generation) when the full look last
    /// passed: until a process changes, it would pass again.
    passed: Option<u64>,
}

impl Liveness {
    /// The nodes that must hold among `live`'s (queue `q`'s), by the
    /// read-write rule in queue order (every reader below the lowest writer,
    /// or that writer).
    fn must_hold(&mut self, world: &View, q: usize, live: &[Process<'_>]) -> &[String] {
        let nodes = || live.iter().filter_map(|p| p.agent.node());
        let (names, must) = self.must.entry(q).or_default();
        if !nodes().eq(names.iter().map(String::as_str)) {
            *names = nodes().map(str::to_owned).collect();
            let interop = world.queues()[q].scheme.interop();
            let recipe = world.recipe_of(q);
            // The candidates' own stem (a semaphore's may be a drawn prefix;
            // a read-write lock's are fixed).
            let prefix = live
                .iter()
                .find_map(|p| p.candidate)
                .map_or(String::new(), |c| c.config().prefix().to_owned());
            let (queue, _) = zkelect_core::name::queue(names, &prefix, interop, recipe);
            *must = recipe
                .holders(&queue)
                .into_iter()
                .map(|i| queue[i].name.clone())
                .collect();
        }
        must
    }
}

impl Invariant<View> for Liveness {
    fn name(&self) -> &'static str {
        "liveness"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP | Kinds::LIVENESS_DUE
    }

    fn check_step(&mut self, world: &View) -> Result<Holds, String> {
        // Before the settled phase nothing is due (the phase is among the
        // counts); after, a pass on the counts alone stands until they
        // change, and a full look's until a process changes (the census
        // generation and `passed` say so).
        if world.phase() != Phase::Settled {
            return Ok(Holds::UntilCountsChange);
        }
        let counts_alone = (0..world.queues().len()).all(|q| Self::counts_pass(world, q));
        self.check(world, &Event::Step)?;
        Ok(if counts_alone {
            Holds::UntilCountsChange
        } else {
            Holds::UntilChange
        })
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
        let due = match event {
            Event::LivenessDue => true,
            Event::Step => world.phase() == Phase::Settled,
            _ => false,
        };
        if !due || self.passed == Some(world.generation()) {
            return Ok(());
        }
        // The common settled step: enough leaders in every queue, and (for a
        // read-write lock, where the rule names who must hold) no live node
        // waiting, by the world's running counts; anything else takes the
        // full look.
        let mut verdict = Ok(());
        for q in 0..world.queues().len() {
            if Self::counts_pass(world, q) {
                continue;
            }
            // A read-write lock and a semaphore (whose nodes may weigh
            // more than one permit) are judged by who the rule says must
            // hold; an election and a mutex by how many hold.
            let by_rule = matches!(
                world.recipe_of(q),
                Recipe::ReadWrite | Recipe::Semaphore { .. }
            );
            verdict = verdict.and_then(|()| self.look(world, q, by_rule));
        }
        if verdict.is_ok() {
            self.passed = Some(world.generation());
        }
        verdict
    }
}

impl Liveness {
    /// Whether the census counts of queue `q` alone show it live: enough
    /// leaders and (in a read-write lock) no live node waiting.
    fn counts_pass(world: &View, q: usize) -> bool {
        let census = world.queue_census(q);
        let rw = world.recipe_of(q) == Recipe::ReadWrite;
        census.live_leading >= census.live.min(world.leaders_of(q) as usize)
            && !(rw && census.waiting > 0)
    }

    /// The full look at queue `q`, when the census cannot rule a miss out
    /// (kept out of line, so the common step's call stays small).
    #[inline(never)]
    fn look(&mut self, world: &View, q: usize, rw: bool) -> Result<(), String> {
        let is_live = |p: &Process<'_>| {
            p.queue == q
                && !p.crashed
                && !p.observer
                && !revoked_foreign(p)
                && !matches!(p.agent.role(), Role::Idle | Role::Closed | Role::Failed)
        };
        let live: Vec<_> = world.processes().filter(is_live).collect();
        let leaders = live.iter().filter(|p| p.agent.role().is_leader()).count();
        let want = live.len().min(world.leaders_of(q) as usize);
        let path = world.queues()[q].path.as_str();
        let which = if q == 0 {
            String::new()
        } else {
            format!(" in {path}")
        };
        if rw {
            // Who must hold: the rule over the live processes' nodes.
            let must = self.must_hold(world, q, &live);
            let missing: Vec<String> = live
                .iter()
                .filter(|p| {
                    !p.agent.role().is_leader()
                        && p.agent.node().is_some_and(|n| must.iter().any(|m| m == n))
                })
                .map(|p| who(p))
                .collect();
            let few = world.recipe_of(q) == Recipe::ReadWrite && leaders < want;
            if !missing.is_empty() || few {
                let roles: Vec<String> = live
                    .iter()
                    .map(|p| {
                        format!(
                            "{}:{:?}:{}:{:?}",
                            who(p),
                            rule_of(p),
                            p.agent.node().unwrap_or("-"),
                            p.agent.role()
                        )
                    })
                    .collect();
                return Err(format!(
                    "{}ms after the faults stopped{which}, {} should hold and do not (or nobody holds); live: {}; the server's queue: {:?}",
                    world.now().saturating_since(world.healed_at()).as_millis(),
                    missing.join(" "),
                    roles.join(" "),
                    world
                        .children_of(q)
                        .iter()
                        .map(|c| {
                            let owner = world
                                .zk()
                                .stat(&format!("{path}/{c}"))
                                .map_or(0, |s| s.ephemeral_owner);
                            let pid = world
                                .processes()
                                .find(|p| p.session_id.is_some_and(|s| s.0 == owner))
                                .map(|p| p.pid);
                            format!("{c}@{owner:#x}:{pid:?}")
                        })
                        .collect::<Vec<_>>()
                ));
            }
            return Ok(());
        }
        if leaders < want {
            let roles: Vec<String> = live
                .iter()
                .map(|p| format!("{}:{:?}", who(p), p.agent.role()))
                .collect();
            return Err(format!(
                "{leaders} leader(s) {}ms after the faults stopped{which}, want {want}; live: {}",
                world.now().saturating_since(world.healed_at()).as_millis(),
                roles.join(" ")
            ));
        }
        Ok(())
    }
}

/// One server change wakes at most k followers (the predecessor recipe: each
/// node is watched by the k nodes above it, and by one more under the
/// two-watch takeover), judged by what the server sees:
/// reads sent on waking from a watch event of that change that reach it. A
/// candidate's own-node watch does not count (the change was to its own node),
/// nor does the watch of a candidate whose node an operator deleted and which
/// has not learned it yet (it is out of the queue, but the watch it set on its
/// old predecessor is still on the server, so it and the deleted node's
/// successor may both watch that predecessor). Nor does a machine whose
/// watch the server set only after the change: on a shared session the
/// change fired the session's older watch, and a lagging event thread hands
/// its event to every machine armed when it arrives (lag seeds 37589, 54755).
/// Only zkelect candidates are counted: the foreign models act on stale
/// watches as their libraries do.
#[derive(Debug, Default)]
pub struct NoHerd {
    woken: BTreeMap<u64, BTreeSet<usize>>,
}

impl Invariant<View> for NoHerd {
    fn name(&self) -> &'static str {
        "no-herd"
    }

    fn kinds(&self) -> Kinds {
        Kinds::WOKEN
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
        let Event::Woken {
            pid,
            cause,
            allowed,
        } = *event
        else {
            return Ok(());
        };
        // The Parent strategy wakes every watcher of the parent by design:
        // only what the application asked for is allowed (a candidate that
        // herds although it asked for its predecessor is still caught).
        let options = world.knobs().options;
        if options.parent > 0
            && options.process(world.seed(), pid).strategy == WatchStrategy::Parent
        {
            return Ok(());
        }
        let woken = self.woken.entry(cause).or_default();
        woken.insert(pid);
        // A two-watch waiter (its own configuration says, not the draw: a
        // canary may run another) watches one node beyond its k nearest, so
        // a change may wake one reader more where one of them runs it.
        let spare = woken.iter().any(|&p| {
            world
                .process(p)
                .config
                .is_some_and(zkelect_core::Config::two_watch)
        });
        let k = allowed.max(world.leaders_of(world.queue_of(pid)) as usize) + usize::from(spare);
        if woken.len() > k {
            return Err(format!(
                "one server change (#{cause}) made {} candidates read (at most {k}): {:?}",
                woken.len(),
                woken.iter().map(|p| format!("p{p}")).collect::<Vec<_>>()
            ));
        }
        Ok(())
    }
}

/// How long a window [`NoStorm`] counts a session's requests over.
pub const STORM_WINDOW: Duration = Duration::from_secs(10);

/// The requests a zkelect candidate (or a foreign model) may send in one
/// [`STORM_WINDOW`]: 30 a second, sustained. Its main lane sends at most
/// one request per answer and every retry waits a backoff, so the busiest
/// candidate of 40,000 seeds sent 77 in ten seconds (wipes, churn and
/// reconnects included); a loop without a backoff sends one request per
/// round trip, 100 a second and more in the simulator, thousands on a real
/// link.
pub const STORM_PER_MACHINE: usize = 300;

/// What an observer may send in one [`STORM_WINDOW`] besides
/// [`STORM_PER_MACHINE`], per process ever started in its queue (and
/// look-alike): it reads every listed node after each listing, so a change
/// costs it a listing and a read per node. The busiest observer of 40,000
/// seeds sent 454 in ten seconds, its session's other machines included.
pub const STORM_PER_OBSERVED: usize = 100;

/// No session storms the server: the requests that reach the server from
/// one session within any [`STORM_WINDOW`] (a sliding window: a burst at
/// connecting or relisting is absorbed, a loop that goes on is not) stay
/// under the session's budget: [`STORM_PER_MACHINE`] per machine on it, and
/// [`STORM_PER_OBSERVED`] more per process of an observer's queue. In every
/// phase of every seed, persistent errors included (a candidate under a
/// missing or ephemeral chroot must stop, not loop).
#[derive(Debug, Default)]
pub struct NoStorm {
    /// Per session (by its host's index), the arrival times of its
    /// requests within the window, oldest first.
    windows: Vec<VecDeque<Timestamp>>,
    /// Per session, its budget and the process count it was worked out at.
    budgets: BTreeMap<usize, (usize, usize)>,
}

impl NoStorm {
    fn budget(world: &View, host: usize) -> usize {
        let mut budget = 0;
        for p in world.processes().filter(|p| p.host == host) {
            budget += STORM_PER_MACHINE;
            if p.observer {
                let observed = world.processes().filter(|q| q.queue == p.queue).count()
                    + world.lookalikes().len();
                budget += STORM_PER_OBSERVED * observed;
            }
        }
        budget.max(STORM_PER_MACHINE)
    }
}

impl Invariant<View> for NoStorm {
    fn name(&self) -> &'static str {
        "no-storm"
    }

    fn kinds(&self) -> Kinds {
        Kinds::REQUEST
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
        let Event::Request { host, .. } = event else {
            return Ok(());
        };
        let now = world.now();
        if self.windows.len() <= *host {
            self.windows.resize_with(*host + 1, VecDeque::new);
        }
        let window = &mut self.windows[*host];
        window.push_back(now);
        while window.front().is_some_and(|&t| t + STORM_WINDOW <= now) {
            window.pop_front();
        }
        let sent = window.len();
        if sent <= STORM_PER_MACHINE {
            return Ok(());
        }
        // Processes only come (spawns): the budget is worked out again when
        // their number changed.
        let procs = world.processes().len();
        let budget = match self.budgets.get(host) {
            Some(&(at, budget)) if at == procs => budget,
            _ => {
                let budget = Self::budget(world, *host);
                self.budgets.insert(*host, (procs, budget));
                budget
            }
        };
        if sent > budget {
            let first = window.front().copied().unwrap_or(now);
            return Err(format!(
                "p{host}'s session sent {sent} requests in {} ms (from {first} to {now}), more than its {budget} for {} s",
                now.as_millis() - first.as_millis(),
                STORM_WINDOW.as_secs()
            ));
        }
        Ok(())
    }
}
