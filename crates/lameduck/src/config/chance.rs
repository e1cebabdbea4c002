//! [`GoawayChance`]: the probability that an admitted request ends its connection gracefully
//! after its response, so that long-lived clients behind L4 balancers spread over pods started
//! later (kube-apiserver's `--goaway-chance`).

use alloc::format;
use alloc::string::String;
use core::fmt;
use core::str::FromStr;

use super::option::{ConfigError, ConfigOption};

/// The probability, in [0, [`GoawayChance::MAX`]], that an admitted request (health and
/// metrics routes excepted) ends its connection gracefully after its response: an HTTP/2
/// connection gets a GOAWAY that lets its in-flight streams finish, an HTTP/1 response carries
/// `Connection: close`. The client's next request opens a new connection, which the balancer
/// places afresh. Default [`GoawayChance::OFF`].
///
/// Held in millionths, so a value is exact to one in a million; adapters draw against
/// [`GoawayChance::threshold`] with a random `u32`.
///
/// ```
/// use lameduck::config::GoawayChance;
///
/// let chance: GoawayChance = "0.02".parse()?;
/// assert_eq!(chance, GoawayChance::MAX);
/// assert_eq!(chance.to_string(), "0.02");
/// assert!(GoawayChance::OFF.is_off());
/// let err = "0.5".parse::<GoawayChance>().unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     r#"invalid value "0.5" for --goaway-chance: expected a probability from 0 to 0.02"#
/// );
/// # Ok::<(), lameduck::config::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoawayChance {
    millionths: u32,
}

/// One in a million: the unit [`GoawayChance`] counts in.
const PER_MILLION: u32 = 1_000_000;

impl GoawayChance {
    /// Never: no connection is ended by chance (the default).
    pub const OFF: GoawayChance = GoawayChance { millionths: 0 };

    /// The largest chance accepted, 0.02 (one request in fifty), as kube-apiserver.
    pub const MAX: GoawayChance = GoawayChance { millionths: 20_000 };

    /// The chance `probability`, rounded to the nearest millionth.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidChance`] when `probability` is not a number from 0 to
    /// [`GoawayChance::MAX`].
    pub fn new(probability: f64) -> Result<Self, ConfigError> {
        Self::from_probability(probability).ok_or_else(|| ConfigError::InvalidChance {
            option: ConfigOption::GoawayChance,
            value: format!("{probability}"),
        })
    }

    fn from_probability(probability: f64) -> Option<Self> {
        // NaN fails both comparisons.
        if !(0.0..=0.02).contains(&probability) {
            return None;
        }
        // In range, so the product is at most 20,000.5 and the cast is exact after rounding
        // half up (`f64::round` is not in `core`).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let millionths = (probability * f64::from(PER_MILLION) + 0.5) as u32;
        Some(GoawayChance { millionths })
    }

    /// The chance as a probability.
    #[must_use]
    pub fn probability(self) -> f64 {
        f64::from(self.millionths) / f64::from(PER_MILLION)
    }

    /// Whether the chance is zero: nothing to draw.
    #[must_use]
    #[inline]
    pub fn is_off(self) -> bool {
        self.millionths == 0
    }

    /// A request ends its connection when a uniformly random `u32` is below this value
    /// (zero when [`GoawayChance::is_off`]).
    #[must_use]
    #[inline]
    pub fn threshold(self) -> u32 {
        // At most 0.02 * 2^32, so the quotient fits.
        #[allow(clippy::cast_possible_truncation)]
        let threshold = ((u64::from(self.millionths) << 32) / u64::from(PER_MILLION)) as u32;
        threshold
    }

    /// Whether a request whose draw is `random` (a uniformly random `u32`) ends its connection.
    #[must_use]
    #[inline]
    pub fn closes(self, random: u32) -> bool {
        random < self.threshold()
    }
}

impl FromStr for GoawayChance {
    type Err = ConfigError;

    /// A decimal probability from 0 to 0.02 (`0`, `0.001`, `2e-2`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim()
            .parse::<f64>()
            .ok()
            .and_then(Self::from_probability)
            .ok_or_else(|| ConfigError::InvalidChance {
                option: ConfigOption::GoawayChance,
                value: String::from(s),
            })
    }
}

impl fmt::Display for GoawayChance {
    /// The shortest decimal that parses back to the same chance (`0`, `0.001`, `0.02`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.millionths == 0 {
            return f.write_str("0");
        }
        let digits = format!("{:06}", self.millionths);
        write!(f, "0.{}", digits.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn parses_the_range_and_prints_it_back() {
        for (text, millionths, printed) in [
            ("0", 0, "0"),
            ("0.0", 0, "0"),
            ("0.02", 20_000, "0.02"),
            ("0.001", 1_000, "0.001"),
            ("2e-2", 20_000, "0.02"),
            ("0.000001", 1, "0.000001"),
            (" 0.01 ", 10_000, "0.01"),
        ] {
            let chance: GoawayChance = text.parse().unwrap();
            assert_eq!(chance.millionths, millionths, "{text}");
            assert_eq!(chance.to_string(), printed);
            assert_eq!(printed.parse::<GoawayChance>(), Ok(chance));
        }
    }

    #[test]
    fn rejects_what_is_not_a_probability_in_range() {
        for text in [
            "", " ", "-0.01", "0.0201", "0.5", "1", "NaN", "inf", "x", "0.02x",
        ] {
            let err = text.parse::<GoawayChance>().unwrap_err();
            assert_eq!(err.option(), Some(ConfigOption::GoawayChance), "{text}");
            assert!(err.to_string().contains("--goaway-chance"), "{err}");
        }
        assert!(GoawayChance::new(f64::NAN).is_err());
        assert!(GoawayChance::new(-0.0).is_ok());
        assert!(GoawayChance::new(0.020_000_1).is_err());
    }

    #[test]
    fn the_threshold_is_the_chance_of_a_random_u32() {
        assert_eq!(GoawayChance::OFF.threshold(), 0);
        assert!(!GoawayChance::OFF.closes(0));
        let max = GoawayChance::MAX;
        // 0.02 * 2^32 = 85,899,345.92
        assert_eq!(max.threshold(), 85_899_345);
        assert!(max.closes(0));
        assert!(max.closes(85_899_344));
        assert!(!max.closes(85_899_345));
        assert!((max.probability() - 0.02).abs() < 1e-12);
    }
}
