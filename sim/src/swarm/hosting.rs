//! Several machines on one session, observers, and further queues: which
//! process runs on whose session.

use zkelect_core::Recipe;

use super::recipe::Queue;
use crate::rng::SimRng;

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
    /// Multi-locks over side queues ([`Hosting::draw_multi_locks`]), whose
    /// parts start after every other machine, each multi-lock's in its
    /// sorted order.
    pub multi_locks: Vec<MultiLockDraw>,
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
    /// ([`Hosting::draw_queues`], a stream of their own), and the
    /// multi-locks ([`Hosting::draw_multi_locks`], another).
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
        hosting.draw_multi_locks(seed, candidates);
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
}

/// One multi-lock of the world: the queues of its parts, in the order its
/// application names them (two multi-locks may name the same queues in
/// opposite orders; the core takes them sorted), the candidate whose
/// session its parts ride on, and how long it tries before it gives up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiLockDraw {
    /// The queues of its parts (indices of the world's queues: 1 and up are
    /// [`Hosting::queues`]), as named.
    pub queues: Vec<usize>,
    /// The first queue's candidate whose session its parts ride on.
    pub on: usize,
    /// Gives up an acquisition after this long (`try_acquire(timeout)`);
    /// `None`: waits as long as it takes.
    pub give_up: Option<std::time::Duration>,
}
