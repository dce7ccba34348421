//! The runtime's clock as the core sees it: milliseconds since the
//! session's driver started.

use std::time::Duration;

use tokio::time::Instant;
use zkelect_core::Timestamp;

/// Maps the runtime's clock onto the machine's: milliseconds since the
/// driver started. Built on `tokio::time::Instant`, so paused test time
/// (`#[tokio::test(start_paused = true)]`) is the machine's time too.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    epoch: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            epoch: Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.at(Instant::now())
    }

    fn at(&self, instant: Instant) -> Timestamp {
        let ms = instant.saturating_duration_since(self.epoch).as_millis();
        Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    /// The instant of a machine timestamp (rounded down to the millisecond
    /// the machine sees, so a sleep until it never wakes before it is due).
    /// A timestamp too far out for the runtime's clock (a close that waits
    /// until the session ends) maps to a century from the epoch.
    pub(crate) fn instant(&self, at: Timestamp) -> Instant {
        const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
        let after = Duration::from_millis(at.as_millis()).min(FAR);
        self.epoch.checked_add(after).unwrap_or(self.epoch + FAR)
    }

    /// The moment the clock counts from.
    pub(crate) fn epoch(&self) -> Instant {
        self.epoch
    }
}
