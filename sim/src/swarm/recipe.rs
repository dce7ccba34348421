//! The recipe of a seed's queue: [`Queue`], and how a seed draws it.

use zkelect_core::{Recipe, Rule};

use crate::rng::SimRng;

/// The recipe of the swarm's queue: every zkelect process of one
/// queue shares it, and the k of an election or a semaphore is
/// [`Swarm::leaders`](super::Swarm::leaders). `Queue::default()` is an election (as every hand-built
/// scenario was before the swarm drew locks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Queue {
    /// Leader election with [`Swarm::leaders`](super::Swarm::leaders) leaders.
    #[default]
    Election,
    /// A fair mutex (`leaders` is 1).
    Mutex,
    /// A semaphore with [`Swarm::leaders`](super::Swarm::leaders) permits.
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
    pub(super) fn draw_from(rng: &mut SimRng, leaders: u32, one: bool) -> (Self, u32) {
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
