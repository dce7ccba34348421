//! What one seed decides: the scenario (VOPR's "swarm" testing) and its fault plan.

use std::fmt;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use zkelect_core::{ConnectionPolicy, Timestamp};

/// A seeded random stream that stays the same across versions.
#[derive(Debug, Clone)]
pub struct SimRng(ChaCha8Rng);

impl SimRng {
    /// A stream for `seed`, separated by `label` so subsystems do not share draws.
    pub fn new(seed: u64, label: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(
            seed ^ label.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        ))
    }

    /// A number in `[lo, hi]`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.0.next_u64() % (hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// A raw draw.
    pub fn draw(&mut self) -> u64 {
        self.0.next_u64()
    }
}

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
}

/// A deliberately broken candidate, to prove a checker can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Canary {
    /// Never sees `Disconnected` and does not probe: keeps leading through partitions.
    IgnoresDisconnect,
    /// No nonce in node names: a create lost to ConnectionLoss leaves an orphan.
    Unprotected,
    /// Watches the parent: every change wakes every follower (the herd).
    ParentWatch,
}

impl Canary {
    /// Every canary.
    pub const ALL: [Canary; 3] = [
        Canary::IgnoresDisconnect,
        Canary::Unprotected,
        Canary::ParentWatch,
    ];
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
}

impl fmt::Display for Swarm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "candidates={} leaders={} session_timeout={}ms policy={:?} chaos={}ms reorder={} pauses={} faults={}",
            self.candidates,
            self.leaders,
            self.session_timeout.as_millis(),
            self.policy,
            self.chaos.as_millis(),
            self.reorder,
            self.pauses,
            self.plan.len()
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
}

impl Swarm {
    /// Draws the scenario and its plan from `seed`.
    pub fn from_seed(seed: u64, overrides: Overrides) -> Self {
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
        let mut population = candidates;
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
                    let fault = match rng.range(0, 2) {
                        0 => Fault::CrashLeader,
                        1 => Fault::PartitionLeader {
                            ms: rng.range(t / 2, t * 2),
                        },
                        _ => Fault::CloseLeader,
                    };
                    plan.push((at(&mut rng), fault));
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
                        Fault::Spawn
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
        }
    }
}
