//! The options by name ([`ConfigOption`]: flag, field, default, help) and the errors that
//! name them ([`ConfigError`]).

use alloc::string::String;
use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use crate::duration::{DurationError, GoDuration};

/// One configurable option, named as an example server's command-line flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigOption {
    /// `--shutdown-delay`, [`Config::shutdown_delay`](super::Config::shutdown_delay).
    ShutdownDelay,
    /// `--shutdown-send-retry-after`,
    /// [`Config::shutdown_send_retry_after`](super::Config::shutdown_send_retry_after).
    ShutdownSendRetryAfter,
    /// `--shutdown-watch-termination-grace-period`,
    /// [`Config::shutdown_watch_termination_grace_period`].
    ///
    /// [`Config::shutdown_watch_termination_grace_period`]:
    ///     super::Config::shutdown_watch_termination_grace_period
    ShutdownWatchTerminationGracePeriod,
    /// `--request-timeout`, [`Config::request_timeout`](super::Config::request_timeout).
    RequestTimeout,
    /// `--livez-grace-period`, [`Config::livez_grace_period`](super::Config::livez_grace_period).
    LivezGracePeriod,
    /// `--min-watch-drain-qps`,
    /// [`Config::min_watch_drain_qps`](super::Config::min_watch_drain_qps).
    MinWatchDrainQps,
    /// `--exempt-path-prefix`,
    /// [`Config::exempt_path_prefixes`](super::Config::exempt_path_prefixes).
    ExemptPathPrefixes,
    /// `--goaway-chance`, [`Config::goaway_chance`](super::Config::goaway_chance).
    GoawayChance,
    /// `--idle-close-spread`, [`Config::idle_close_spread`](super::Config::idle_close_spread).
    IdleCloseSpread,
    /// `--max-connection-age`,
    /// [`Config::max_connection_age`](super::Config::max_connection_age).
    MaxConnectionAge,
    /// `--max-connection-age-grace`,
    /// [`Config::max_connection_age_grace`](super::Config::max_connection_age_grace).
    MaxConnectionAgeGrace,
}

impl ConfigOption {
    /// Every option, in declaration order.
    pub const ALL: [ConfigOption; 11] = [
        ConfigOption::ShutdownDelay,
        ConfigOption::ShutdownSendRetryAfter,
        ConfigOption::ShutdownWatchTerminationGracePeriod,
        ConfigOption::RequestTimeout,
        ConfigOption::LivezGracePeriod,
        ConfigOption::MinWatchDrainQps,
        ConfigOption::ExemptPathPrefixes,
        ConfigOption::GoawayChance,
        ConfigOption::IdleCloseSpread,
        ConfigOption::MaxConnectionAge,
        ConfigOption::MaxConnectionAgeGrace,
    ];

    /// The command-line flag, such as `--shutdown-delay`.
    #[must_use]
    pub const fn flag(self) -> &'static str {
        match self {
            ConfigOption::ShutdownDelay => "--shutdown-delay",
            ConfigOption::ShutdownSendRetryAfter => "--shutdown-send-retry-after",
            ConfigOption::ShutdownWatchTerminationGracePeriod => {
                "--shutdown-watch-termination-grace-period"
            }
            ConfigOption::RequestTimeout => "--request-timeout",
            ConfigOption::LivezGracePeriod => "--livez-grace-period",
            ConfigOption::MinWatchDrainQps => "--min-watch-drain-qps",
            ConfigOption::ExemptPathPrefixes => "--exempt-path-prefix",
            ConfigOption::GoawayChance => "--goaway-chance",
            ConfigOption::IdleCloseSpread => "--idle-close-spread",
            ConfigOption::MaxConnectionAge => "--max-connection-age",
            ConfigOption::MaxConnectionAgeGrace => "--max-connection-age-grace",
        }
    }

    /// The field name, such as `shutdown_delay`, as [`Config`](super::Config)'s getter is called.
    #[must_use]
    pub const fn field(self) -> &'static str {
        match self {
            ConfigOption::ShutdownDelay => "shutdown_delay",
            ConfigOption::ShutdownSendRetryAfter => "shutdown_send_retry_after",
            ConfigOption::ShutdownWatchTerminationGracePeriod => {
                "shutdown_watch_termination_grace_period"
            }
            ConfigOption::RequestTimeout => "request_timeout",
            ConfigOption::LivezGracePeriod => "livez_grace_period",
            ConfigOption::MinWatchDrainQps => "min_watch_drain_qps",
            ConfigOption::ExemptPathPrefixes => "exempt_path_prefixes",
            ConfigOption::GoawayChance => "goaway_chance",
            ConfigOption::IdleCloseSpread => "idle_close_spread",
            ConfigOption::MaxConnectionAge => "max_connection_age",
            ConfigOption::MaxConnectionAgeGrace => "max_connection_age_grace",
        }
    }

    /// The default value as [`ConfigBuilder::set`](super::ConfigBuilder::set) would accept it,
    /// for `--help` output.
    #[must_use]
    pub const fn default_value(self) -> &'static str {
        match self {
            ConfigOption::ShutdownDelay
            | ConfigOption::ShutdownWatchTerminationGracePeriod
            | ConfigOption::LivezGracePeriod
            | ConfigOption::IdleCloseSpread
            | ConfigOption::MaxConnectionAge
            | ConfigOption::MaxConnectionAgeGrace => "0s",
            ConfigOption::ShutdownSendRetryAfter => "false",
            ConfigOption::RequestTimeout => "1m0s",
            ConfigOption::MinWatchDrainQps => "200",
            ConfigOption::ExemptPathPrefixes => "/readyz,/livez,/healthz,/metrics",
            ConfigOption::GoawayChance => "0",
        }
    }

    /// A one-line description, for `--help` output.
    #[must_use]
    pub const fn help(self) -> &'static str {
        match self {
            ConfigOption::ShutdownDelay => {
                "lame-duck window: /readyz fails but requests are served this long after the stop signal"
            }
            ConfigOption::ShutdownSendRetryAfter => {
                "keep listening and answer 429 until in-flight requests have drained (retry-after mode)"
            }
            ConfigOption::ShutdownWatchTerminationGracePeriod => {
                "how long long-running requests get to end; 0 = they are not waited for"
            }
            ConfigOption::RequestTimeout => {
                "bound on every normal request and so on the drain; 0 = no per-request timeout"
            }
            ConfigOption::LivezGracePeriod => {
                "post-start-hook checks pass on /livez for this long after start"
            }
            ConfigOption::MinWatchDrainQps => {
                "floor of the rate, per second, at which long-running requests are ended"
            }
            ConfigOption::ExemptPathPrefixes => {
                "comma-separated path prefixes never rejected during shutdown"
            }
            ConfigOption::GoawayChance => {
                "probability (0 to 0.02) that a request ends its connection gracefully, to rebalance behind L4 balancers"
            }
            ConfigOption::IdleCloseSpread => {
                "close the connections idle at the stop each at a random point of this window, not all at once; 0 = off"
            }
            ConfigOption::MaxConnectionAge => {
                "end each connection gracefully once it is this old (each drawn within +-10 %), so clients rebalance; 0 = off"
            }
            ConfigOption::MaxConnectionAgeGrace => {
                "how long an aged connection's streams get before it is cut; 0 = no bound beyond the requests' own"
            }
        }
    }

    /// Whether the option is a boolean, so a flag parser may accept the bare flag as `true`.
    #[must_use]
    pub const fn is_bool(self) -> bool {
        matches!(self, ConfigOption::ShutdownSendRetryAfter)
    }

    /// Whether the option holds a duration.
    #[must_use]
    pub const fn is_duration(self) -> bool {
        matches!(
            self,
            ConfigOption::ShutdownDelay
                | ConfigOption::ShutdownWatchTerminationGracePeriod
                | ConfigOption::RequestTimeout
                | ConfigOption::LivezGracePeriod
                | ConfigOption::IdleCloseSpread
                | ConfigOption::MaxConnectionAge
                | ConfigOption::MaxConnectionAgeGrace
        )
    }
}

impl fmt::Display for ConfigOption {
    /// Writes the flag, such as `--shutdown-delay`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.flag())
    }
}

impl FromStr for ConfigOption {
    type Err = ConfigError;

    /// Accepts the flag with or without its leading `--` (`--shutdown-delay`,
    /// `shutdown-delay`) or the field name (`shutdown_delay`). kube-apiserver's
    /// `--shutdown-delay-duration` and the plural `exempt-path-prefixes` are accepted too.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bare = s.strip_prefix("--").unwrap_or(s);
        ConfigOption::ALL
            .into_iter()
            .find(|option| {
                let flag = option.flag();
                bare == flag.strip_prefix("--").unwrap_or(flag) || bare == option.field()
            })
            .or(match bare {
                "shutdown-delay-duration" => Some(ConfigOption::ShutdownDelay),
                "exempt-path-prefixes" => Some(ConfigOption::ExemptPathPrefixes),
                _ => None,
            })
            .ok_or_else(|| ConfigError::UnknownOption {
                name: String::from(s),
            })
    }
}

/// Why a configuration value was rejected. Every variant but
/// [`ConfigError::UnknownOption`] names the option, and its message names the option's flag.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A duration option's text is not a valid Go-style duration, or is negative.
    ///
    /// A negative value reads as kube-apiserver words it:
    /// `--shutdown-delay can not be a negative value (got "-1s")`.
    #[error("{}", InvalidDurationMessage::new(*.option, .value, .source))]
    InvalidDuration {
        /// The option.
        option: ConfigOption,
        /// The rejected text.
        value: String,
        /// What is wrong with it.
        source: DurationError,
    },
    /// A duration is longer than [`MAX_CONFIG_DURATION`](super::MAX_CONFIG_DURATION).
    #[error("{option} can not be longer than {}, got {}", GoDuration(*.max), GoDuration(*.value))]
    TooLarge {
        /// The option.
        option: ConfigOption,
        /// The rejected duration.
        value: Duration,
        /// The longest accepted duration, [`MAX_CONFIG_DURATION`](super::MAX_CONFIG_DURATION).
        max: Duration,
    },
    /// A boolean option's text is not one of `true`, `false`, `1`, `0` (in any case).
    #[error("invalid value {value:?} for {option}: expected true, false, 1 or 0")]
    InvalidBool {
        /// The option.
        option: ConfigOption,
        /// The rejected text.
        value: String,
    },
    /// A numeric option's text is not a whole number that fits in a `u32`.
    #[error("invalid value {value:?} for {option}: expected a whole number from 0 to 4294967295")]
    InvalidNumber {
        /// The option.
        option: ConfigOption,
        /// The rejected text.
        value: String,
    },
    /// [`Config::late_arrival_percent`](super::Config::late_arrival_percent) is over 100.
    #[error("late_arrival_percent must be from 0 to 100, got {value}")]
    LateArrivalPercent {
        /// The rejected percentage.
        value: u8,
    },
    /// A path prefix is empty or does not start with `/`.
    #[error("invalid value {value:?} for {option}: a path prefix must start with '/'")]
    InvalidPathPrefix {
        /// The option.
        option: ConfigOption,
        /// The rejected prefix.
        value: String,
    },
    /// A probability option's text is not a number from 0 to
    /// [`GoawayChance::MAX`](super::GoawayChance::MAX) (0.02).
    #[error("invalid value {value:?} for {option}: expected a probability from 0 to 0.02")]
    InvalidChance {
        /// The option.
        option: ConfigOption,
        /// The rejected text.
        value: String,
    },
    /// [`Config::idle_close_spread`](super::Config::idle_close_spread) is not shorter than the
    /// HTTP shutdown timeout ([`Config::http_shutdown_timeout`](super::Config::http_shutdown_timeout)):
    /// the window must end before the server stops waiting for its connections.
    #[error(
        "{option} ({}) must be shorter than the HTTP shutdown timeout ({}: --request-timeout, or 2s in retry-after mode)",
        GoDuration(*.value),
        GoDuration(*.http_shutdown_timeout)
    )]
    SpreadNotShorter {
        /// The option ([`ConfigOption::IdleCloseSpread`]).
        option: ConfigOption,
        /// The rejected spread.
        value: Duration,
        /// The HTTP shutdown timeout it must be shorter than.
        http_shutdown_timeout: Duration,
    },
    /// [`ConfigOption::from_str`] was given a name that is no option.
    #[error("unknown option {name:?}")]
    UnknownOption {
        /// The name given.
        name: String,
    },
}

impl ConfigError {
    /// The option the error is about; `None` for [`ConfigError::UnknownOption`] and
    /// [`ConfigError::LateArrivalPercent`] (set in code only, not a flag).
    #[must_use]
    pub fn option(&self) -> Option<ConfigOption> {
        match self {
            ConfigError::InvalidDuration { option, .. }
            | ConfigError::TooLarge { option, .. }
            | ConfigError::InvalidBool { option, .. }
            | ConfigError::InvalidNumber { option, .. }
            | ConfigError::InvalidPathPrefix { option, .. }
            | ConfigError::InvalidChance { option, .. }
            | ConfigError::SpreadNotShorter { option, .. } => Some(*option),
            ConfigError::UnknownOption { .. } | ConfigError::LateArrivalPercent { .. } => None,
        }
    }
}

/// The message of [`ConfigError::InvalidDuration`].
struct InvalidDurationMessage<'a> {
    option: ConfigOption,
    value: &'a str,
    source: &'a DurationError,
}

impl<'a> InvalidDurationMessage<'a> {
    fn new(option: ConfigOption, value: &'a str, source: &'a DurationError) -> Self {
        InvalidDurationMessage {
            option,
            value,
            source,
        }
    }
}

impl fmt::Display for InvalidDurationMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let InvalidDurationMessage {
            option,
            value,
            source,
        } = self;
        match source {
            DurationError::Negative { .. } => {
                write!(f, "{option} can not be a negative value (got {value:?})")
            }
            _ => write!(
                f,
                "invalid value {value:?} for {option}: {}",
                source.reason()
            ),
        }
    }
}
