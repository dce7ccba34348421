//! Timers and backoff. The machine never sleeps: it says when it next wants
//! [`Candidate::handle_timeout`](crate::Candidate::handle_timeout) through
//! [`Candidate::poll_timeout`](crate::Candidate::poll_timeout).

use std::time::Duration;

use crate::name::splitmix64;
use crate::time::Timestamp;

/// The machine's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Timer {
    /// Retry the current step after a transient error.
    Retry,
    /// Send the next liveness probe.
    Probe,
    /// The link or the session may have gone stale: re-check leadership.
    Lease,
}

const TIMERS: [Timer; 3] = [Timer::Retry, Timer::Probe, Timer::Lease];

/// One optional deadline per [`Timer`]; the earliest is the machine's wake-up.
/// A bit per timer says which are set (`[Option<Timestamp>; 3]` would take 48
/// bytes of every machine where this takes 25). Packed, like [`Backoff`], so
/// that its 25 bytes share the machine's padding instead of rounding up to 32.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(C, packed)]
pub(crate) struct TimerTable {
    /// Meaningful only where `set` has the timer's bit.
    deadlines: [Timestamp; 3],
    set: u8,
}

impl TimerTable {
    fn bit(timer: Timer) -> u8 {
        1 << timer as u8
    }

    pub(crate) fn set(&mut self, timer: Timer, at: Timestamp) {
        self.deadlines[timer as usize] = at;
        self.set |= Self::bit(timer);
    }

    pub(crate) fn stop(&mut self, timer: Timer) {
        self.deadlines[timer as usize] = Timestamp::default();
        self.set &= !Self::bit(timer);
    }

    pub(crate) fn get(&self, timer: Timer) -> Option<Timestamp> {
        (self.set & Self::bit(timer) != 0).then(|| self.deadlines[timer as usize])
    }

    pub(crate) fn is_set(&self, timer: Timer) -> bool {
        self.get(timer).is_some()
    }

    pub(crate) fn next(&self) -> Option<Timestamp> {
        TIMERS.iter().filter_map(|&t| self.get(t)).min()
    }
}

/// Exponential backoff with deterministic jitter drawn from a seeded SplitMix64.
/// The bounds are the caller's (a candidate's are in its config): every
/// machine of thousands on a session holds one of these.
///
/// Packed (9 bytes, byte-aligned) so that it fills the padding among a
/// machine's one-byte fields instead of taking 16 bytes of its own; the
/// attempt is capped at 16 doublings anyway, so a byte holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, packed)]
pub(crate) struct Backoff {
    state: u64,
    attempt: u8,
}

impl Backoff {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            attempt: 0,
            state: seed,
        }
    }

    /// The next delay: `min * 2^attempt`, capped at `max`, then jittered into
    /// `[d/2, d]` so a crowd of candidates does not retry in lock-step. Never
    /// zero: a retry at the instant of the failure it answers would let a
    /// transport that fails fast spin the machine without time passing.
    pub(crate) fn next_delay(&mut self, min: Duration, max: Duration) -> Duration {
        let attempt = self.attempt;
        let factor = 1u32 << attempt.min(16);
        self.attempt = attempt.saturating_add(1);
        let full = min.saturating_mul(factor).min(max);
        let state = splitmix64(self.state);
        self.state = state;
        let full_ms = u64::try_from(full.as_millis()).unwrap_or(u64::MAX).max(1);
        let half = full_ms / 2;
        Duration::from_millis((half + state % (full_ms - half + 1)).max(1))
    }

    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_keeps_each_timer_and_reports_the_earliest() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Probe, Timestamp::from_millis(30));
        t.set(Timer::Retry, Timestamp::from_millis(10));
        assert_eq!(t.next(), Some(Timestamp::from_millis(10)));
        assert_eq!(t.get(Timer::Retry), Some(Timestamp::from_millis(10)));
        t.stop(Timer::Retry);
        assert!(!t.is_set(Timer::Retry));
        assert_eq!(t.get(Timer::Lease), None);
        assert_eq!(t.next(), Some(Timestamp::from_millis(30)));
    }

    #[test]
    fn backoff_grows_caps_and_is_reproducible() {
        let min = Duration::from_millis(100);
        let max = Duration::from_millis(1_000);
        let mut a = Backoff::new(42);
        let mut b = Backoff::new(42);
        let delays: Vec<_> = (0..8).map(|_| a.next_delay(min, max)).collect();
        let again: Vec<_> = (0..8).map(|_| b.next_delay(min, max)).collect();
        assert_eq!(delays, again);
        assert!(delays[0] >= Duration::from_millis(50) && delays[0] <= min);
        assert!(delays
            .iter()
            .all(|d| *d <= max && *d >= Duration::from_millis(50)));
        assert!(delays[7] >= Duration::from_millis(500));
        a.reset();
        assert!(a.next_delay(min, max) <= min);
    }

    #[test]
    fn the_shortest_backoff_still_lets_time_pass() {
        let ms = Duration::from_millis(1);
        for seed in 0..64 {
            let mut b = Backoff::new(seed);
            assert!((0..4).all(|_| b.next_delay(ms, ms) == ms), "seed {seed}");
        }
    }
}
