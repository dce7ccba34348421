//! The core's own notion of time.
//!
//! The machine never reads a clock: every time-dependent call takes `now` as its
//! first argument. A [`Timestamp`] is milliseconds since an arbitrary epoch chosen
//! by whoever drives the machine (the simulator starts at zero; the async driver
//! maps `tokio::time::Instant` onto it).

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on the driver's monotonic clock, in milliseconds since an arbitrary epoch.
///
/// ```
/// use std::time::Duration;
/// use zkelect_core::Timestamp;
/// let t = Timestamp::from_millis(1_000) + Duration::from_millis(250);
/// assert_eq!(t.as_millis(), 1_250);
/// assert_eq!(t.to_string(), "t=1_250ms");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Timestamp(u64);

impl Timestamp {
    /// The epoch itself.
    pub const ZERO: Self = Self(0);

    /// A timestamp `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// The time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Self) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Timestamp {
    type Output = Self;
    fn add(self, rhs: Duration) -> Self {
        Self(self.0.saturating_add(millis(rhs)))
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Self;
    fn sub(self, rhs: Duration) -> Self {
        Self(self.0.saturating_sub(millis(rhs)))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Thousands separated by '_' so traces line up and read at a glance.
        let digits = self.0.to_string();
        let mut out = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push('_');
            }
            out.push(ch);
        }
        write!(f, "t={out}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_overflowing() {
        let t = Timestamp::from_millis(u64::MAX - 1);
        assert_eq!((t + Duration::from_secs(10)).as_millis(), u64::MAX);
        assert_eq!((Timestamp::ZERO - Duration::from_secs(1)).as_millis(), 0);
        assert_eq!(
            Timestamp::from_millis(5).saturating_since(Timestamp::from_millis(9)),
            Duration::ZERO
        );
    }

    #[test]
    fn display_groups_thousands() {
        assert_eq!(Timestamp::from_millis(0).to_string(), "t=0ms");
        assert_eq!(Timestamp::from_millis(999).to_string(), "t=999ms");
        assert_eq!(Timestamp::from_millis(12_345).to_string(), "t=12_345ms");
        assert_eq!(
            Timestamp::from_millis(1_234_567).to_string(),
            "t=1_234_567ms"
        );
    }
}
