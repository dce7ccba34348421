//! Multi-locks: several side queues' locks taken all or none by one
//! application ([`MultiLockDraw`]), each part a machine riding on one
//! candidate's session, run by the core's
//! [`MultiLock`](zkelect_core::multilock::MultiLock).

use std::time::Duration;

use super::hosting::{Hosting, MultiLockDraw, SideQueue};
use super::recipe::Queue;
use crate::rng::SimRng;

impl Hosting {
    /// Two mutexes of their own and two multi-locks naming them in
    /// opposite orders, on candidates 0 and 1's sessions, waiting as long as
    /// it takes (unless it has multi-locks already): the world in which a
    /// multi-lock taking its locks in the order given (the planted
    /// `MultiLockInGivenOrder`) deadlocks.
    pub fn opposed_multi_locks(&mut self) {
        if !self.multi_locks.is_empty() {
            return;
        }
        let first = self.queues.len() + 1;
        for _ in 0..2 {
            self.queues.push(SideQueue {
                queue: Queue::Mutex,
                leaders: 1,
                machines: Vec::new(),
            });
        }
        for (queues, on) in [(vec![first, first + 1], 0), (vec![first + 1, first], 1)] {
            self.multi_locks.push(MultiLockDraw {
                queues,
                on,
                give_up: None,
            });
        }
    }

    /// Draws multi-locks for `seed` from a stream of their own (label 25),
    /// after every other draw of the hosting, so those stay put: 1 in 6
    /// seeds add 2 or 3 lock queues of their own (a mutex, a semaphore or a
    /// read-write lock; no other machine) and 2 or 3 multi-locks over 2 or
    /// 3 of them each, named in a shuffled order, each riding on a candidate
    /// that runs on its own session; 1 in 2 give up after 2–12 s.
    pub fn draw_multi_locks(&mut self, seed: u64, candidates: usize) {
        let mut rng = SimRng::new(seed, 25);
        if candidates == 0 || !rng.chance(1.0 / 6.0) {
            return;
        }
        let first = self.queues.len() + 1;
        let n = rng.range(2, 3) as usize;
        for _ in 0..n {
            let (queue, k) = match rng.range(0, 2) {
                0 => (Queue::Mutex, 1),
                1 => (Queue::Semaphore, rng.range(2, 3) as u32),
                _ => (
                    Queue::ReadWrite {
                        writers: [50, 80, 100][rng.range(0, 2) as usize],
                    },
                    1,
                ),
            };
            self.queues.push(SideQueue {
                queue,
                leaders: k,
                machines: Vec::new(),
            });
        }
        let hosts: Vec<usize> = (0..candidates).filter(|&h| self.host(h) == h).collect();
        for _ in 0..rng.range(2, 3) {
            let mut queues: Vec<usize> = (first..first + n).collect();
            for i in (1..queues.len()).rev() {
                queues.swap(i, rng.range(0, i as u64) as usize);
            }
            queues.truncate(rng.range(2, n as u64) as usize);
            let on = hosts[rng.range(0, hosts.len() as u64 - 1) as usize];
            let give_up = rng
                .chance(0.5)
                .then(|| Duration::from_millis(rng.range(2_000, 12_000)));
            self.multi_locks.push(MultiLockDraw {
                queues,
                on,
                give_up,
            });
        }
    }
}
