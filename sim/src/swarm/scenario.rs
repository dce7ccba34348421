//! What one seed decides as a whole: the [`Swarm`] (its scenario and fault
//! plan), and how a seed, a canary or an override draws it.

use std::fmt;
use std::time::Duration;

use zkelect_core::{ConnectionPolicy, Recipe, Timestamp};

use super::env::{AclChange, BadChroot, Env, Refusal};
use super::hosting::Hosting;
use super::plan::{Fault, FaultMix};
use super::recipe::Queue;
use crate::foreign::Scheme;
use crate::rng::SimRng;

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
        swarm.revocation_requests(seed);
        // Not in a canary's seeds either; the knobs' own stream says
        // whether sessions authenticate.
        let authenticated = super::Knobs::from_seed(seed, false).acl.authenticates();
        swarm.env.refusal =
            Refusal::draw(seed, authenticated, &swarm.env.hosting, swarm.candidates);
        let read_write = std::iter::once(&swarm.env.queue)
            .chain(swarm.env.hosting.queues.iter().map(|q| &q.queue))
            .any(|q| matches!(q, Queue::ReadWrite { .. }));
        swarm.env.acl_change = AclChange::draw(
            seed,
            authenticated,
            super::Options::draw(seed).downgrade > 0,
            read_write,
            swarm.env.ensemble.is_none(),
        );
        swarm
    }

    /// In seeds whose options draw revocable processes, from a stream of
    /// their own (label 23), so every other draw stays put: cooperative
    /// revocation requests at up to 0.15 per second of the chaos phase.
    fn revocation_requests(&mut self, seed: u64) {
        if super::Options::draw(seed).revocable == 0 {
            return;
        }
        let rate = SimRng::new(seed, 23).range(0, 150) as f64 / 1_000.0;
        self.ask_revocations(seed, rate);
    }

    /// Cooperative revocation requests at `rate` per second of the chaos
    /// phase (from a stream of `seed`'s own, label 24), each by a process
    /// picked among the candidates, into the node of a holder of its queue
    /// ([`Fault::AskRevoke`]); none next to Curator's models, whose latch a
    /// data change strands, nor in a run without faults.
    pub(crate) fn ask_revocations(&mut self, seed: u64, rate: f64) {
        if self.env.library() == Some(Scheme::Curator) || self.plan.is_empty() {
            return;
        }
        let mut rng = SimRng::new(seed, 24);
        let seconds = self.chaos.as_secs();
        let population = self.candidates.max(1) as u64;
        for second in 0..seconds {
            if rng.chance(rate) {
                let at = Timestamp::from_millis(second * 1_000 + rng.range(0, 999));
                let pid = rng.range(0, population - 1) as usize;
                self.plan.push((at, Fault::AskRevoke { pid }));
            }
        }
        self.plan.sort_by_key(|(t, _)| *t);
    }

    /// [`from_seed`](Self::from_seed) without the further queues (a
    /// canary's seeds keep the world they were documented with).
    pub(crate) fn one_queue_from_seed(seed: u64, overrides: Overrides) -> Self {
        let mut swarm = Self::from_seed_without_side_faults(seed, overrides);
        swarm.env.hosting.queues.clear();
        swarm.env.hosting.multi_locks.clear();
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

impl Hosting {
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
            multi_locks: Vec::new(),
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
