//! The per-connection draws: each takes a uniformly random `u32` that the adapter supplies
//! and turns it into a duration of the [`Config`], in integer arithmetic on nanoseconds, so a
//! draw is exact, reproducible and never panics.

use core::time::Duration;

use super::Config;

/// Nanoseconds per second.
const NANOS_PER_SEC: u128 = 1_000_000_000;

/// The denominator of the connection-age draw, `10 × (2³² − 1)`: `sample / (2³² − 1)` runs
/// from 0 to 1 inclusive, and the factor is `(9 + 2 × that) / 10`.
const AGE_DENOMINATOR: u128 = 10 * u32::MAX as u128;

impl Config {
    /// A connection's delay in the [idle-close window](Config::idle_close_spread), from a
    /// uniformly random `sample`: `spread × sample / 2³²`, so uniform in `[0, spread)` when
    /// `sample` is; zero when the spread is off.
    #[must_use]
    pub fn idle_close_delay(&self, sample: u32) -> Duration {
        spread_delay(self.idle_close_spread, sample)
    }

    /// A connection's own [maximum age](Config::max_connection_age), from a uniformly random
    /// `sample` the adapter draws once per connection: the age scaled by a factor uniform in
    /// `[0.9, 1.1]` when `sample` is (`0` gives 0.9 × the age, `u32::MAX` gives 1.1 × the
    /// age), rounded down to the nanosecond, and monotone in `sample`. `None` when the maximum
    /// age is off (zero).
    ///
    /// The limit may be up to a tenth longer than
    /// [`MAX_CONFIG_DURATION`](super::MAX_CONFIG_DURATION); add it to an instant with
    /// [`Instant::saturating_add`](crate::Instant::saturating_add).
    ///
    /// ```
    /// use core::time::Duration;
    /// use lameduck::Config;
    ///
    /// let config = Config::builder()
    ///     .max_connection_age(Duration::from_secs(600))
    ///     .build()?;
    /// assert_eq!(config.connection_age_limit(0), Some(Duration::from_secs(540)));
    /// assert_eq!(config.connection_age_limit(u32::MAX), Some(Duration::from_secs(660)));
    /// assert_eq!(Config::default().connection_age_limit(7), None);
    /// # Ok::<(), lameduck::ConfigError>(())
    /// ```
    #[must_use]
    pub fn connection_age_limit(&self, sample: u32) -> Option<Duration> {
        if self.max_connection_age.is_zero() {
            None
        } else {
            Some(age_limit(self.max_connection_age, sample))
        }
    }
}

/// `spread × sample / 2³²`: in `[0, spread)`, uniform when `sample` is.
fn spread_delay(spread: Duration, sample: u32) -> Duration {
    from_nanos_saturating((spread.as_nanos() * u128::from(sample)) >> 32)
}

/// `age × (9 + 2 × sample / (2³² − 1)) / 10`, rounded down: from 0.9 × `age` at `sample = 0`
/// to 1.1 × `age` at `u32::MAX`.
pub(super) fn age_limit(age: Duration, sample: u32) -> Duration {
    // The factor's numerator, at most `11 × (2³² − 1)` (below 2³⁶).
    let numerator = 9 * u128::from(u32::MAX) + 2 * u128::from(sample);
    // `age × numerator` could pass `u128::MAX` for the longest `Duration`s (about 2⁹⁵ ns times
    // 2³⁶), so it is split at the denominator: with `nanos = q × d + r`,
    // `nanos × n / d = q × n + r × n / d` exactly, where `q × n` is below 2⁶⁰ × 2³⁶ and
    // `r × n` below 2³⁶ × 2³⁶.
    let nanos = age.as_nanos();
    let (q, r) = (nanos / AGE_DENOMINATOR, nanos % AGE_DENOMINATOR);
    from_nanos_saturating(q * numerator + r * numerator / AGE_DENOMINATOR)
}

/// A `Duration` of `nanos` nanoseconds, or [`Duration::MAX`] when it does not hold that many.
fn from_nanos_saturating(nanos: u128) -> Duration {
    match u64::try_from(nanos / NANOS_PER_SEC) {
        Ok(secs) => {
            #[allow(clippy::cast_possible_truncation)] // below 10⁹
            let subsec = (nanos % NANOS_PER_SEC) as u32;
            Duration::new(secs, subsec)
        }
        Err(_) => Duration::MAX,
    }
}
