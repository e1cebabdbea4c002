//! Time as a value: the core never reads a clock.
//!
//! [`Instant`] is a point on the driver's monotonic timeline, counted in nanoseconds from an
//! epoch the driver chooses (usually the moment it started). Durations are
//! [`core::time::Duration`]. With the `std` feature, [`StdClock`] converts
//! `std::time::Instant` values into this timeline; the core itself never calls it.

use core::fmt;
use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time on the driver's monotonic clock, in nanoseconds since the driver's epoch.
///
/// Arithmetic saturates instead of overflowing: an [`Instant`] near `u64::MAX` nanoseconds
/// (about 584 years) stands for "never".
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Instant = Instant(0);
    /// The latest representable instant; used as "never".
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `nanos` nanoseconds after the epoch.
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }

    /// An instant `millis` milliseconds after the epoch (saturating).
    #[must_use]
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis.saturating_mul(1_000_000))
    }

    /// An instant `secs` seconds after the epoch (saturating).
    #[must_use]
    pub const fn from_secs(secs: u64) -> Self {
        Instant(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the epoch.
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed since the epoch.
    #[must_use]
    pub const fn since_epoch(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero when `earlier` is later than `self`.
    #[must_use]
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Instant::MAX`].
    #[must_use]
    pub fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_nanos_saturating(d)))
    }

    /// `self + d`, or `None` when it does not fit.
    #[must_use]
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        let nanos = u64::try_from(d.as_nanos()).ok()?;
        self.0.checked_add(nanos).map(Instant)
    }
}

/// A duration's nanoseconds, saturating at `u64::MAX`.
#[must_use]
pub(crate) fn duration_nanos_saturating(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturating addition.
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating difference.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T+{:?}", self.since_epoch())
    }
}

/// Converts `std::time::Instant` values to [`Instant`]s counted from a fixed epoch.
///
/// Drivers create one at start-up and convert every reading of their runtime's clock through
/// it (tokio's `Instant` derefs to the std one, so paused-time tests work).
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug)]
pub struct StdClock {
    epoch: std::time::Instant,
}

#[cfg(feature = "std")]
impl StdClock {
    /// A clock whose epoch is `epoch`.
    #[must_use]
    pub fn with_epoch(epoch: std::time::Instant) -> Self {
        StdClock { epoch }
    }

    /// The epoch this clock counts from.
    #[must_use]
    pub fn epoch(&self) -> std::time::Instant {
        self.epoch
    }

    /// Converts a reading of the std clock; readings before the epoch map to [`Instant::ZERO`].
    #[must_use]
    pub fn instant(&self, at: std::time::Instant) -> Instant {
        Instant(duration_nanos_saturating(
            at.saturating_duration_since(self.epoch),
        ))
    }

    /// Converts back to the std clock, saturating at the largest representable std instant.
    #[must_use]
    pub fn to_std(&self, at: Instant) -> std::time::Instant {
        let mut d = at.since_epoch();
        loop {
            if let Some(t) = self.epoch.checked_add(d) {
                return t;
            }
            d /= 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Instant::from_secs(1), Duration::ZERO);
        assert_eq!(Instant::from_secs(1).checked_add(Duration::MAX), None);
        assert_eq!(
            Instant::from_millis(1500) - Instant::from_secs(1),
            Duration::from_millis(500)
        );
    }

    #[cfg(feature = "std")]
    #[test]
    fn std_clock_round_trips() {
        let epoch = std::time::Instant::now();
        let clock = StdClock::with_epoch(epoch);
        let later = epoch + Duration::from_millis(1234);
        assert_eq!(clock.instant(later), Instant::from_millis(1234));
        assert_eq!(clock.to_std(Instant::from_millis(1234)), later);
        assert_eq!(clock.instant(epoch), Instant::ZERO);
    }
}
