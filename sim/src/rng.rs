//! The simulator's only source of randomness: ChaCha8, seeded, one stream per
//! subsystem.
//!
//! ChaCha8 from `rand_chacha` gives a stream that stays fixed across versions
//! (rand's `StdRng` does not promise that), so a seed printed today replays the
//! same run tomorrow.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A seeded random stream that stays the same across versions.
#[derive(Debug, Clone)]
pub struct SimRng(ChaCha8Rng);

impl SimRng {
    /// A stream for `seed`, separated by `label` so subsystems do not share draws
    /// (the scenario, the network and the world each draw from their own).
    pub fn new(seed: u64, label: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(
            seed ^ label.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        ))
    }

    /// A number in `[lo, hi]` (`lo` if the range is empty).
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
