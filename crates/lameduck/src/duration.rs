//! Go-style durations (`500ms`, `2s`, `1m30s`), as kube-apiserver's flags take them.
//!
//! [`parse_duration`] accepts exactly the grammar of Go's `time.ParseDuration`:
//! an optional sign followed by one or more decimal numbers, each with an optional fraction and
//! a unit suffix (`ns`, `us`, `µs` (U+00B5), `μs` (U+03BC), `ms`, `s`, `m`, `h`), for example
//! `300ms`, `1.5h`, `.5s`, `2h45m`. The lone string `0` needs no unit. Unlike Go, negative
//! durations are rejected (a configuration duration can not be negative), but a negative zero
//! such as `-0` or `-0s` is zero, as in Go.
//!
//! [`GoDuration`] (returned by [`format_duration`]) prints a duration the way Go's
//! `Duration.String()` does (`0s`, `1.5s`, `1m30s`, `500ms`, `1h0m0s`, `2µs`), so
//! `parse_duration(&format_duration(d).to_string()) == Ok(d)` for every `d` up to
//! [`MAX_DURATION`].
//!
//! Only integer arithmetic is used: fractions are exact to the nanosecond and anything finer is
//! truncated, like Go. Digits of a fraction beyond the nineteenth are ignored, as Go ignores
//! them.

use alloc::string::String;
use core::fmt;
use core::str::FromStr;
use core::time::Duration;

/// The longest duration Go can represent: `i64::MAX` nanoseconds, printed
/// `2562047h47m16.854775807s` (about 292 years).
///
/// [`parse_duration`] rejects anything longer with [`DurationError::Overflow`].
pub const MAX_DURATION: Duration = Duration::new(9_223_372_036, 854_775_807);

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Go's accumulator bound: a magnitude of more than `1 << 63` nanoseconds is an overflow even for
/// negative durations, whose minimum is `-(1 << 63)`.
const MAGNITUDE_LIMIT: u128 = 1 << 63;

/// `i64::MAX` nanoseconds, the largest positive duration.
const MAX_NANOS: u128 = (1 << 63) - 1;

/// Fraction digits kept; later ones are ignored (Go stops accumulating near `1 << 63`).
const MAX_FRACTION_DIGITS: u32 = 19;

/// The accepted units and their length in nanoseconds.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Why a string is not a valid duration.
///
/// Every variant but [`DurationError::Empty`] carries the whole input, so the message shows
/// the user what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// The input is the empty string.
    #[error("invalid duration \"\": {}", REASON_EMPTY)]
    Empty,
    /// The input has a leading `-` and a non-zero value.
    #[error("invalid duration {input:?}: {}", REASON_NEGATIVE)]
    Negative {
        /// The whole input.
        input: String,
    },
    /// A number is not followed by a unit (`10`, `1h30`).
    #[error("invalid duration {input:?}: {}", REASON_MISSING_UNIT)]
    MissingUnit {
        /// The whole input.
        input: String,
    },
    /// A number is followed by something that is not a unit (`1x`, `5 s`).
    #[error("invalid duration {input:?}: unknown unit {unit:?} {}", UNIT_HINT)]
    UnknownUnit {
        /// The text in the unit's place.
        unit: String,
        /// The whole input.
        input: String,
    },
    /// The input does not follow the grammar (`abc`, `.s`, `-`).
    #[error("invalid duration {input:?}: {}", REASON_INVALID)]
    Invalid {
        /// The whole input.
        input: String,
    },
    /// The value is longer than [`MAX_DURATION`].
    #[error("invalid duration {input:?}: {}", REASON_OVERFLOW)]
    Overflow {
        /// The whole input.
        input: String,
    },
}

const REASON_EMPTY: &str = "empty string";
const REASON_NEGATIVE: &str = "can not be a negative value";
const REASON_MISSING_UNIT: &str = "missing unit (use one of ns, us, µs, ms, s, m, h)";
const UNIT_HINT: &str = "(use one of ns, us, µs, ms, s, m, h)";
const REASON_INVALID: &str = "expected numbers with units, such as 500ms, 2s or 1m30s";
const REASON_OVERFLOW: &str = "longer than the maximum 2562047h47m16.854775807s";

impl DurationError {
    /// The input that failed to parse (empty for [`DurationError::Empty`]).
    #[must_use]
    pub fn input(&self) -> &str {
        match self {
            DurationError::Empty => "",
            DurationError::Negative { input }
            | DurationError::MissingUnit { input }
            | DurationError::UnknownUnit { input, .. }
            | DurationError::Invalid { input }
            | DurationError::Overflow { input } => input,
        }
    }

    /// The message without the `invalid duration "…": ` prefix, for callers that name the
    /// input themselves (a flag parser that prints the flag and its value).
    ///
    /// ```
    /// use lameduck::duration::parse_duration;
    ///
    /// let err = parse_duration("10").unwrap_err();
    /// assert_eq!(err.reason().to_string(), "missing unit (use one of ns, us, µs, ms, s, m, h)");
    /// ```
    #[must_use]
    pub fn reason(&self) -> Reason<'_> {
        Reason(self)
    }
}

/// [`DurationError`]'s message without the input; see [`DurationError::reason`].
#[derive(Clone, Copy, Debug)]
pub struct Reason<'a>(&'a DurationError);

impl fmt::Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            DurationError::Empty => f.write_str(REASON_EMPTY),
            DurationError::Negative { .. } => f.write_str(REASON_NEGATIVE),
            DurationError::MissingUnit { .. } => f.write_str(REASON_MISSING_UNIT),
            DurationError::UnknownUnit { unit, .. } => {
                write!(f, "unknown unit {unit:?} {UNIT_HINT}")
            }
            DurationError::Invalid { .. } => f.write_str(REASON_INVALID),
            DurationError::Overflow { .. } => f.write_str(REASON_OVERFLOW),
        }
    }
}

/// Parses a Go-style duration such as `500ms`, `1.5h` or `1m30s`.
///
/// The grammar is Go's `time.ParseDuration` (see the [module documentation](self)); negative
/// values are rejected with [`DurationError::Negative`] and values above [`MAX_DURATION`] with
/// [`DurationError::Overflow`].
///
/// # Errors
///
/// A [`DurationError`] saying what is wrong and carrying the input.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use lameduck::duration::{parse_duration, DurationError};
///
/// assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
/// assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
/// assert_eq!(
///     parse_duration("10").unwrap_err().to_string(),
///     r#"invalid duration "10": missing unit (use one of ns, us, µs, ms, s, m, h)"#,
/// );
/// assert!(matches!(parse_duration("-1s"), Err(DurationError::Negative { .. })));
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let nanos = parse_nanos(s)?;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| overflow(s))?;
    let subsec = u32::try_from(nanos % NANOS_PER_SEC).map_err(|_| overflow(s))?;
    Ok(Duration::new(secs, subsec))
}

fn overflow(input: &str) -> DurationError {
    DurationError::Overflow {
        input: String::from(input),
    }
}

fn invalid(input: &str) -> DurationError {
    DurationError::Invalid {
        input: String::from(input),
    }
}

/// Splits `s` after its first `n` bytes; `None` when `n` is not a char boundary.
fn split(s: &str, n: usize) -> Option<(&str, &str)> {
    Some((s.get(..n)?, s.get(n..)?))
}

/// Number of leading ASCII digits of `s`.
fn digit_count(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_digit).count()
}

/// The duration's magnitude in nanoseconds, at most [`MAX_NANOS`].
fn parse_nanos(input: &str) -> Result<u128, DurationError> {
    if input.is_empty() {
        return Err(DurationError::Empty);
    }
    let (negative, mut rest) = if let Some(rest) = input.strip_prefix('-') {
        (true, rest)
    } else if let Some(rest) = input.strip_prefix('+') {
        (false, rest)
    } else {
        (false, input)
    };
    // Go's special case: a lone "0" needs no unit.
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid(input));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        // The next character must be [0-9.].
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid(input));
        }

        // [0-9]*
        let (int_digits, after_int) =
            split(rest, digit_count(rest)).ok_or_else(|| invalid(input))?;
        let mut whole: u128 = 0;
        for digit in int_digits.bytes() {
            whole = whole * 10 + u128::from(digit - b'0');
            if whole > MAGNITUDE_LIMIT {
                return Err(overflow(input));
            }
        }
        rest = after_int;

        // (\.[0-9]*)?
        let mut fraction: u128 = 0;
        let mut scale: u128 = 1;
        let mut fraction_digits = 0;
        if let Some(after_dot) = rest.strip_prefix('.') {
            let (frac_digits, after_frac) =
                split(after_dot, digit_count(after_dot)).ok_or_else(|| invalid(input))?;
            fraction_digits = frac_digits.len();
            for digit in frac_digits.bytes().take(MAX_FRACTION_DIGITS as usize) {
                fraction = fraction * 10 + u128::from(digit - b'0');
                scale *= 10;
            }
            rest = after_frac;
        }
        if int_digits.is_empty() && fraction_digits == 0 {
            // No digits at all, as in ".s" or "-.5".
            return Err(invalid(input));
        }

        // The unit runs up to the next number.
        let unit_len = rest
            .bytes()
            .take_while(|b| *b != b'.' && !b.is_ascii_digit())
            .count();
        if unit_len == 0 {
            return Err(DurationError::MissingUnit {
                input: String::from(input),
            });
        }
        let (unit, after_unit) = split(rest, unit_len).ok_or_else(|| invalid(input))?;
        let Some(&(_, unit_nanos)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(DurationError::UnknownUnit {
                unit: String::from(unit),
                input: String::from(input),
            });
        };
        rest = after_unit;

        // whole <= 2^63 and unit_nanos < 2^42, so nothing here overflows a u128; the
        // fraction term is below one unit, and truncated to whole nanoseconds.
        let part = whole * unit_nanos + fraction * unit_nanos / scale;
        if part > MAGNITUDE_LIMIT {
            return Err(overflow(input));
        }
        total += part;
        if total > MAGNITUDE_LIMIT {
            return Err(overflow(input));
        }
    }
    if negative && total != 0 {
        return Err(DurationError::Negative {
            input: String::from(input),
        });
    }
    if total > MAX_NANOS {
        return Err(overflow(input));
    }
    Ok(total)
}

/// A [`Duration`] that displays the way Go's `Duration.String()` prints it.
///
/// Durations under a second use the largest of `ns`, `µs` (U+00B5) and `ms` that fits, with a
/// fraction (`1.5µs`, `500ms`); longer ones are printed as hours, minutes and seconds, leading
/// zero units omitted (`1.5s`, `1m30s`, `1h0m0s`). Zero is `0s`. Durations longer than
/// [`MAX_DURATION`] are printed the same way although [`parse_duration`] rejects them.
///
/// Width, fill and alignment flags are honoured (`{:>8}`).
///
/// ```
/// use core::time::Duration;
/// use lameduck::duration::GoDuration;
///
/// assert_eq!(GoDuration(Duration::from_secs(90)).to_string(), "1m30s");
/// assert_eq!(GoDuration(Duration::from_millis(500)).to_string(), "500ms");
/// assert_eq!("1h".parse::<GoDuration>().map(|d| d.0), Ok(Duration::from_secs(3600)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub Duration);

/// Wraps `d` so it displays as Go prints durations (`1m30s`); see [`GoDuration`].
#[must_use]
pub fn format_duration(d: Duration) -> GoDuration {
    GoDuration(d)
}

impl From<Duration> for GoDuration {
    fn from(d: Duration) -> Self {
        GoDuration(d)
    }
}

impl From<GoDuration> for Duration {
    fn from(d: GoDuration) -> Self {
        d.0
    }
}

impl FromStr for GoDuration {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s).map(GoDuration)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        write_go(self.0.as_nanos(), &mut out)?;
        f.pad(&out)
    }
}

/// Writes `nanos` as Go's `Duration.String()` would.
fn write_go(nanos: u128, out: &mut impl fmt::Write) -> fmt::Result {
    if nanos == 0 {
        return out.write_str("0s");
    }
    if nanos < NANOS_PER_SEC {
        let (unit, digits, unit_name) = if nanos < 1_000 {
            (1, 0, "ns")
        } else if nanos < 1_000_000 {
            (1_000, 3, "\u{b5}s")
        } else {
            (1_000_000, 6, "ms")
        };
        write!(out, "{}", nanos / unit)?;
        write_fraction(nanos % unit, digits, out)?;
        return out.write_str(unit_name);
    }
    let secs = nanos / NANOS_PER_SEC;
    let (hours, minutes, seconds) = (secs / 3600, secs / 60 % 60, secs % 60);
    if hours > 0 {
        write!(out, "{hours}h{minutes}m")?;
    } else if minutes > 0 {
        write!(out, "{minutes}m")?;
    }
    write!(out, "{seconds}")?;
    write_fraction(nanos % NANOS_PER_SEC, 9, out)?;
    out.write_str("s")
}

/// Writes `.ddd` for a fraction of `digits` decimal places, trailing zeros dropped; nothing for
/// zero.
fn write_fraction(mut fraction: u128, mut digits: usize, out: &mut impl fmt::Write) -> fmt::Result {
    if fraction == 0 {
        return Ok(());
    }
    while fraction % 10 == 0 {
        fraction /= 10;
        digits = digits.saturating_sub(1);
    }
    write!(out, ".{fraction:0digits$}")
}

#[cfg(test)]
mod tests;
