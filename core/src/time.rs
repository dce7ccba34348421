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

    /// `self + d * num / den`, to the millisecond exactly as that `Duration`
    /// arithmetic gives it, in plain `u64` arithmetic: the lease's fractions
    /// of the session timeout are taken on every input a machine gets.
    pub(crate) fn plus_fraction(self, d: Duration, num: u32, den: u32) -> Self {
        Self(self.0.saturating_add(fraction_millis(d, num, den)))
    }
}

/// Whole milliseconds of `d`, saturating (as `Duration::as_millis`, without
/// its `u128`).
fn millis(d: Duration) -> u64 {
    d.as_secs()
        .checked_mul(1_000)
        .and_then(|ms| ms.checked_add(u64::from(d.subsec_millis())))
        .unwrap_or(u64::MAX)
}

/// Whole milliseconds of `d * num / den` (`den` not zero), saturating.
/// `Duration` multiplies and divides its nanoseconds exactly (rounding
/// down), so this is ⌊nanos · num / (den · 10⁶)⌋, split so that no step
/// leaves `u64`; where one would (a timeout of some 60,000 years, which only
/// a broken transport reports), the same quotient in `u128`, where
/// `Duration`'s own multiplication would panic: the machine must not panic
/// on any input.
fn fraction_millis(d: Duration, num: u32, den: u32) -> u64 {
    const NANOS_PER_MILLI: u64 = 1_000_000;
    let (num, den) = (u64::from(num), u64::from(den));
    let whole = d
        .as_secs()
        .checked_mul(1_000)
        .and_then(|ms| ms.checked_add(u64::from(d.subsec_millis())))
        .and_then(|ms| ms.checked_mul(num));
    match whole {
        // nanos · num = whole · 10⁶ + rest · num, and whole = q · den + m.
        Some(whole) if den != 0 => {
            let rest = u64::from(d.subsec_nanos()) % NANOS_PER_MILLI;
            let (q, m) = (whole / den, whole % den);
            q + (m * NANOS_PER_MILLI + rest * num) / (den * NANOS_PER_MILLI)
        }
        _ => {
            // At most 2^64 s · 10⁹ · 2^32 < 2^128: no overflow.
            let millis = (d.as_nanos() * u128::from(num))
                .checked_div(u128::from(den) * u128::from(NANOS_PER_MILLI));
            millis.map_or(u64::MAX, |ms| u64::try_from(ms).unwrap_or(u64::MAX))
        }
    }
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
    fn fractions_round_as_duration_arithmetic_does() {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        for i in 0..20_000u64 {
            x = crate::name::splitmix64(x);
            let d = match i % 4 {
                // Whole milliseconds (every timeout a server negotiates) ...
                0 => Duration::from_millis(x % 100_000_000),
                // ... and any nanoseconds, up to ages.
                1 => Duration::new(x % 1_000_000, (x >> 32) as u32 % 1_000_000_000),
                2 => Duration::from_nanos(x % 10_000_000_000),
                _ => Duration::new(x >> 12, (x >> 40) as u32 % 1_000_000_000),
            };
            for (num, den) in [(2, 3), (9, 10), (1, 3), (1, 1), (7, 1_000_000)] {
                assert_eq!(
                    fraction_millis(d, num, den),
                    millis(d * num / den),
                    "{d:?} * {num} / {den}"
                );
            }
            assert_eq!(super::millis(d), millis(d), "{d:?}");
        }
        let t = Timestamp::from_millis(u64::MAX - 1);
        assert_eq!(
            t.plus_fraction(Duration::from_secs(10), 2, 3).as_millis(),
            u64::MAX
        );
    }

    /// A session timeout whose milliseconds times the numerator leave `u64`
    /// (found by the `candidate` fuzz target: `Duration::MAX` reported as
    /// the negotiated timeout panicked in `Duration`'s multiplication).
    #[test]
    fn fractions_of_huge_timeouts_saturate_instead_of_panicking() {
        assert_eq!(fraction_millis(Duration::MAX, 9, 10), u64::MAX);
        assert_eq!(
            Timestamp::from_millis(7)
                .plus_fraction(Duration::MAX, 2, 3)
                .as_millis(),
            u64::MAX
        );
        // Past u64 on the way, within it at the end: exact.
        let d = Duration::from_millis(u64::MAX / 5);
        let want = u128::from(u64::MAX / 5) * 9 / 10;
        assert_eq!(u128::from(fraction_millis(d, 9, 10)), want);
        assert_eq!(fraction_millis(d, 9, 0), u64::MAX);
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
