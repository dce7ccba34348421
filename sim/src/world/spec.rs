//! The world's fixed terms: its queues, its phases, and the bounds its
//! client libraries and checkers share.

use std::time::Duration;

use zkelect_core::Recipe;

use crate::foreign::Scheme;
use crate::swarm::Queue;

/// The election path every simulated candidate uses.
pub const PATH: &str = "/svc/leader";

/// One queue of the world (many recipes on one session): queue 0
/// is the swarm's own ([`PATH`], [`Swarm::recipe`](crate::swarm::Swarm::recipe), its interop scheme, its
/// foreign models and look-alikes); the others are its
/// [`SideQueue`](crate::swarm::SideQueue)s, on paths of their own, their candidates naming their
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

/// The longest a client library's event thread lags behind its replies
/// (under [`Fault::LagEvents`](crate::swarm::Fault::LagEvents)).
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
