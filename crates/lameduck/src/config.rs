//! The validated shutdown configuration (see the repository's `docs/design.md#configuration`).
//!
//! A [`Config`] is built with a [`ConfigBuilder`], either through typed setters or, for
//! command-line flags, through [`ConfigBuilder::set`] with a [`ConfigOption`] and its text.
//! Zero is valid everywhere; negative, unparsable and overflowing values are rejected with a
//! [`ConfigError`] that names the option's flag.
//!
//! ```
//! use core::time::Duration;
//! use lameduck::config::{Config, ConfigOption, ShutdownMode};
//!
//! let mut builder = Config::builder().request_timeout(Duration::from_secs(30));
//! builder.set(ConfigOption::ShutdownDelay, "5s")?;
//! builder.set("--shutdown-send-retry-after".parse()?, "true")?;
//! let config = builder.build()?;
//! assert_eq!(config.shutdown_delay(), Duration::from_secs(5));
//! assert_eq!(config.mode(), ShutdownMode::SendRetryAfter);
//! assert_eq!(config.http_shutdown_timeout(), Duration::from_secs(2));
//!
//! let err = Config::builder().set(ConfigOption::RequestTimeout, "-1s").unwrap_err();
//! assert_eq!(err.to_string(), r#"--request-timeout can not be a negative value (got "-1s")"#);
//! # Ok::<(), lameduck::config::ConfigError>(())
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use crate::duration::{parse_duration, DurationError, GoDuration, MAX_DURATION};

/// The longest duration any option accepts: Go's maximum, `i64::MAX` nanoseconds
/// (`2562047h47m16.854775807s`, about 292 years).
///
/// [`crate::Instant`] counts `u64` nanoseconds (about 584 years), so adding a configured
/// duration to any instant in the first ~292 years of a driver's timeline can not overflow.
pub const MAX_CONFIG_DURATION: Duration = MAX_DURATION;

/// Default of [`Config::request_timeout`]: one minute, as kube-apiserver.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Default of [`Config::min_watch_drain_qps`], as kube-apiserver.
pub const DEFAULT_MIN_WATCH_DRAIN_QPS: u32 = 200;

/// Default of [`Config::exempt_path_prefixes`]: the health endpoints and metrics, as
/// kube-apiserver.
pub const DEFAULT_EXEMPT_PATH_PREFIXES: [&str; 4] = ["/readyz", "/livez", "/healthz", "/metrics"];

/// The HTTP shutdown timeout in mode B ([`ShutdownMode::SendRetryAfter`]), as kube-apiserver:
/// requests have drained by the time the listener stops, so two seconds is enough.
pub const MODE_B_HTTP_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// How new requests are refused once [`crate::Signal::NotAcceptingNewRequest`] fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ShutdownMode {
    /// Mode A (the default): the listener closes at `NotAcceptingNewRequest`.
    #[default]
    CloseListener,
    /// Mode B (`shutdown_send_retry_after`): the server keeps listening and answers `429` with
    /// `Retry-After` until in-flight requests have drained, then closes the listener.
    SendRetryAfter,
}

/// A validated shutdown configuration. Build one with [`Config::builder`]; [`Config::default`]
/// holds every default; [`ConfigOption::default_value`] gives each one as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    shutdown_delay: Duration,
    shutdown_send_retry_after: bool,
    shutdown_watch_termination_grace_period: Duration,
    request_timeout: Duration,
    livez_grace_period: Duration,
    min_watch_drain_qps: u32,
    exempt_path_prefixes: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            shutdown_delay: Duration::ZERO,
            shutdown_send_retry_after: false,
            shutdown_watch_termination_grace_period: Duration::ZERO,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            livez_grace_period: Duration::ZERO,
            min_watch_drain_qps: DEFAULT_MIN_WATCH_DRAIN_QPS,
            exempt_path_prefixes: DEFAULT_EXEMPT_PATH_PREFIXES
                .iter()
                .map(|p| String::from(*p))
                .collect(),
        }
    }
}

impl Config {
    /// A builder holding every default.
    #[must_use]
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder::default()
    }

    /// A builder holding this configuration's values, to derive a changed copy.
    #[must_use]
    pub fn to_builder(&self) -> ConfigBuilder {
        ConfigBuilder {
            config: self.clone(),
        }
    }

    /// The lame-duck window: time from `ShutdownInitiated` to `AfterShutdownDelayDuration`,
    /// during which `/readyz` fails but requests are still served. Default 0.
    #[must_use]
    pub fn shutdown_delay(&self) -> Duration {
        self.shutdown_delay
    }

    /// Whether mode B is on (see [`ShutdownMode::SendRetryAfter`]). Default false.
    #[must_use]
    pub fn shutdown_send_retry_after(&self) -> bool {
        self.shutdown_send_retry_after
    }

    /// The shutdown mode, from [`Config::shutdown_send_retry_after`].
    #[must_use]
    pub fn mode(&self) -> ShutdownMode {
        if self.shutdown_send_retry_after {
            ShutdownMode::SendRetryAfter
        } else {
            ShutdownMode::CloseListener
        }
    }

    /// How long long-running requests (watches, SSE, WebSocket) get to end after
    /// `NotAcceptingNewRequest`. Default 0, which means they are not waited for.
    #[must_use]
    pub fn shutdown_watch_termination_grace_period(&self) -> Duration {
        self.shutdown_watch_termination_grace_period
    }

    /// The bound on every normal request (`504` after it), and so on the drain of normal
    /// requests. Default 60s. Zero means there is no per-request timeout; the drain then waits
    /// for normal requests without a bound.
    #[must_use]
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// How long after start post-start-hook checks pass on `/livez` while their hooks run.
    /// Default 0.
    #[must_use]
    pub fn livez_grace_period(&self) -> Duration {
        self.livez_grace_period
    }

    /// The floor of the rate at which long-running requests are ended during the drain, in
    /// requests per second. Default 200.
    #[must_use]
    pub fn min_watch_drain_qps(&self) -> u32 {
        self.min_watch_drain_qps
    }

    /// How long stopping the HTTP listener may take: [`Config::request_timeout`] in mode A,
    /// [`MODE_B_HTTP_SHUTDOWN_TIMEOUT`] (2s) in mode B, as kube-apiserver.
    #[must_use]
    pub fn http_shutdown_timeout(&self) -> Duration {
        match self.mode() {
            ShutdownMode::CloseListener => self.request_timeout,
            ShutdownMode::SendRetryAfter => MODE_B_HTTP_SHUTDOWN_TIMEOUT,
        }
    }

    /// Path prefixes of requests that are never rejected during shutdown. Default
    /// [`DEFAULT_EXEMPT_PATH_PREFIXES`].
    #[must_use]
    pub fn exempt_path_prefixes(&self) -> &[String] {
        &self.exempt_path_prefixes
    }

    /// Whether a request for `path` (without the query) is exempt from rejection.
    ///
    /// This is a plain prefix match, as kube-apiserver does it, so with the defaults
    /// `/healthz/ping` and also `/healthzx` are exempt while `/api` is not.
    #[must_use]
    pub fn is_exempt_path(&self, path: &str) -> bool {
        self.exempt_path_prefixes
            .iter()
            .any(|prefix| path.starts_with(prefix.as_str()))
    }
}

/// One configurable option, named as an example server's command-line flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigOption {
    /// `--shutdown-delay`, [`Config::shutdown_delay`].
    ShutdownDelay,
    /// `--shutdown-send-retry-after`, [`Config::shutdown_send_retry_after`].
    ShutdownSendRetryAfter,
    /// `--shutdown-watch-termination-grace-period`,
    /// [`Config::shutdown_watch_termination_grace_period`].
    ShutdownWatchTerminationGracePeriod,
    /// `--request-timeout`, [`Config::request_timeout`].
    RequestTimeout,
    /// `--livez-grace-period`, [`Config::livez_grace_period`].
    LivezGracePeriod,
    /// `--min-watch-drain-qps`, [`Config::min_watch_drain_qps`].
    MinWatchDrainQps,
    /// `--exempt-path-prefix`, [`Config::exempt_path_prefixes`].
    ExemptPathPrefixes,
}

impl ConfigOption {
    /// Every option, in declaration order.
    pub const ALL: [ConfigOption; 7] = [
        ConfigOption::ShutdownDelay,
        ConfigOption::ShutdownSendRetryAfter,
        ConfigOption::ShutdownWatchTerminationGracePeriod,
        ConfigOption::RequestTimeout,
        ConfigOption::LivezGracePeriod,
        ConfigOption::MinWatchDrainQps,
        ConfigOption::ExemptPathPrefixes,
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
        }
    }

    /// The field name, such as `shutdown_delay`, as [`Config`]'s getter is called.
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
        }
    }

    /// The default value as [`ConfigBuilder::set`] would accept it, for `--help` output.
    #[must_use]
    pub const fn default_value(self) -> &'static str {
        match self {
            ConfigOption::ShutdownDelay
            | ConfigOption::ShutdownWatchTerminationGracePeriod
            | ConfigOption::LivezGracePeriod => "0s",
            ConfigOption::ShutdownSendRetryAfter => "false",
            ConfigOption::RequestTimeout => "1m0s",
            ConfigOption::MinWatchDrainQps => "200",
            ConfigOption::ExemptPathPrefixes => "/readyz,/livez,/healthz,/metrics",
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
                "keep listening and answer 429 until in-flight requests have drained (mode B)"
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
    /// A duration is longer than [`MAX_CONFIG_DURATION`].
    #[error("{option} can not be longer than {}, got {}", GoDuration(*.max), GoDuration(*.value))]
    TooLarge {
        /// The option.
        option: ConfigOption,
        /// The rejected duration.
        value: Duration,
        /// The longest accepted duration, [`MAX_CONFIG_DURATION`].
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
    /// A path prefix is empty or does not start with `/`.
    #[error("invalid value {value:?} for {option}: a path prefix must start with '/'")]
    InvalidPathPrefix {
        /// The option.
        option: ConfigOption,
        /// The rejected prefix.
        value: String,
    },
    /// [`ConfigOption::from_str`] was given a name that is no option.
    #[error("unknown option {name:?}")]
    UnknownOption {
        /// The name given.
        name: String,
    },
}

impl ConfigError {
    /// The option the error is about; `None` for [`ConfigError::UnknownOption`].
    #[must_use]
    pub fn option(&self) -> Option<ConfigOption> {
        match self {
            ConfigError::InvalidDuration { option, .. }
            | ConfigError::TooLarge { option, .. }
            | ConfigError::InvalidBool { option, .. }
            | ConfigError::InvalidNumber { option, .. }
            | ConfigError::InvalidPathPrefix { option, .. } => Some(*option),
            ConfigError::UnknownOption { .. } => None,
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

/// Collects option values and validates them into a [`Config`]; starts from the defaults.
///
/// Typed setters take and return the builder by value, for chaining;
/// [`ConfigBuilder::set`] parses text and works through `&mut`, for flag parsing loops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigBuilder {
    /// Values not yet validated.
    config: Config,
}

impl ConfigBuilder {
    /// Sets [`Config::shutdown_delay`].
    #[must_use]
    pub fn shutdown_delay(mut self, value: Duration) -> Self {
        self.config.shutdown_delay = value;
        self
    }

    /// Sets [`Config::shutdown_send_retry_after`] (mode B when true).
    #[must_use]
    pub fn shutdown_send_retry_after(mut self, value: bool) -> Self {
        self.config.shutdown_send_retry_after = value;
        self
    }

    /// Sets [`Config::shutdown_watch_termination_grace_period`].
    #[must_use]
    pub fn shutdown_watch_termination_grace_period(mut self, value: Duration) -> Self {
        self.config.shutdown_watch_termination_grace_period = value;
        self
    }

    /// Sets [`Config::request_timeout`]; zero means no per-request timeout.
    #[must_use]
    pub fn request_timeout(mut self, value: Duration) -> Self {
        self.config.request_timeout = value;
        self
    }

    /// Sets [`Config::livez_grace_period`].
    #[must_use]
    pub fn livez_grace_period(mut self, value: Duration) -> Self {
        self.config.livez_grace_period = value;
        self
    }

    /// Sets [`Config::min_watch_drain_qps`].
    #[must_use]
    pub fn min_watch_drain_qps(mut self, value: u32) -> Self {
        self.config.min_watch_drain_qps = value;
        self
    }

    /// Replaces [`Config::exempt_path_prefixes`]; an empty list exempts nothing. Each prefix
    /// must start with `/`, which [`ConfigBuilder::build`] checks.
    #[must_use]
    pub fn exempt_path_prefixes(
        mut self,
        prefixes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.config.exempt_path_prefixes = prefixes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets `option` from its command-line text.
    ///
    /// - durations: Go-style ([`parse_duration`]: `500ms`, `2s`, `1m30s`, `0`), not negative;
    /// - [`ConfigOption::ShutdownSendRetryAfter`]: `true`, `false`, `1` or `0`, in any case;
    /// - [`ConfigOption::MinWatchDrainQps`]: a decimal `u32`;
    /// - [`ConfigOption::ExemptPathPrefixes`]: comma-separated prefixes, each starting with
    ///   `/` (no spaces around commas); the empty string means none. Replaces the list.
    ///
    /// On error the builder is unchanged.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the option and the rejected text.
    pub fn set(&mut self, option: ConfigOption, value: &str) -> Result<&mut Self, ConfigError> {
        let duration = || {
            parse_duration(value).map_err(|source| ConfigError::InvalidDuration {
                option,
                value: String::from(value),
                source,
            })
        };
        match option {
            ConfigOption::ShutdownDelay => self.config.shutdown_delay = duration()?,
            ConfigOption::ShutdownWatchTerminationGracePeriod => {
                self.config.shutdown_watch_termination_grace_period = duration()?;
            }
            ConfigOption::RequestTimeout => self.config.request_timeout = duration()?,
            ConfigOption::LivezGracePeriod => self.config.livez_grace_period = duration()?,
            ConfigOption::ShutdownSendRetryAfter => {
                self.config.shutdown_send_retry_after =
                    parse_bool(value).ok_or_else(|| ConfigError::InvalidBool {
                        option,
                        value: String::from(value),
                    })?;
            }
            ConfigOption::MinWatchDrainQps => {
                self.config.min_watch_drain_qps =
                    value
                        .parse::<u32>()
                        .map_err(|_| ConfigError::InvalidNumber {
                            option,
                            value: String::from(value),
                        })?;
            }
            ConfigOption::ExemptPathPrefixes => {
                let prefixes = if value.is_empty() {
                    Vec::new()
                } else {
                    value.split(',').map(String::from).collect()
                };
                check_prefixes(&prefixes)?;
                self.config.exempt_path_prefixes = prefixes;
            }
        }
        Ok(self)
    }

    /// Validates the values: every duration at most [`MAX_CONFIG_DURATION`], every path prefix
    /// starting with `/`.
    ///
    /// # Errors
    ///
    /// The first invalid option, in [`ConfigOption::ALL`] order.
    pub fn build(self) -> Result<Config, ConfigError> {
        let config = self.config;
        let durations = [
            (ConfigOption::ShutdownDelay, config.shutdown_delay),
            (
                ConfigOption::ShutdownWatchTerminationGracePeriod,
                config.shutdown_watch_termination_grace_period,
            ),
            (ConfigOption::RequestTimeout, config.request_timeout),
            (ConfigOption::LivezGracePeriod, config.livez_grace_period),
        ];
        for (option, value) in durations {
            if value > MAX_CONFIG_DURATION {
                return Err(ConfigError::TooLarge {
                    option,
                    value,
                    max: MAX_CONFIG_DURATION,
                });
            }
        }
        check_prefixes(&config.exempt_path_prefixes)?;
        Ok(config)
    }
}

/// `true`/`false`/`1`/`0`, in any case.
fn parse_bool(value: &str) -> Option<bool> {
    if value.eq_ignore_ascii_case("true") || value == "1" {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") || value == "0" {
        Some(false)
    } else {
        None
    }
}

fn check_prefixes(prefixes: &[String]) -> Result<(), ConfigError> {
    match prefixes.iter().find(|p| !p.starts_with('/')) {
        Some(bad) => Err(ConfigError::InvalidPathPrefix {
            option: ConfigOption::ExemptPathPrefixes,
            value: bad.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn defaults_match_the_design_table() {
        let config = Config::default();
        assert_eq!(config.shutdown_delay(), Duration::ZERO);
        assert!(!config.shutdown_send_retry_after());
        assert_eq!(config.mode(), ShutdownMode::CloseListener);
        assert_eq!(
            config.shutdown_watch_termination_grace_period(),
            Duration::ZERO
        );
        assert_eq!(config.request_timeout(), Duration::from_secs(60));
        assert_eq!(config.livez_grace_period(), Duration::ZERO);
        assert_eq!(config.min_watch_drain_qps(), 200);
        assert_eq!(config.http_shutdown_timeout(), Duration::from_secs(60));
        assert_eq!(
            config.exempt_path_prefixes(),
            ["/readyz", "/livez", "/healthz", "/metrics"]
        );
        assert_eq!(Config::builder().build(), Ok(config.clone()));
        assert_eq!(config.to_builder().build(), Ok(config));
        assert_eq!(ShutdownMode::default(), ShutdownMode::CloseListener);
    }

    #[test]
    fn default_values_parse_back_to_the_defaults() {
        let mut builder = Config::builder()
            .shutdown_delay(Duration::from_secs(1))
            .shutdown_send_retry_after(true)
            .shutdown_watch_termination_grace_period(Duration::from_secs(1))
            .request_timeout(Duration::from_secs(1))
            .livez_grace_period(Duration::from_secs(1))
            .min_watch_drain_qps(1)
            .exempt_path_prefixes(["/x"]);
        for option in ConfigOption::ALL {
            builder.set(option, option.default_value()).unwrap();
        }
        assert_eq!(builder.build(), Ok(Config::default()));
    }

    #[test]
    fn http_shutdown_timeout_per_mode() {
        let a = Config::builder()
            .request_timeout(Duration::from_secs(7))
            .build()
            .unwrap();
        assert_eq!(a.mode(), ShutdownMode::CloseListener);
        assert_eq!(a.http_shutdown_timeout(), Duration::from_secs(7));
        let b = a
            .to_builder()
            .shutdown_send_retry_after(true)
            .build()
            .unwrap();
        assert_eq!(b.mode(), ShutdownMode::SendRetryAfter);
        assert_eq!(b.http_shutdown_timeout(), MODE_B_HTTP_SHUTDOWN_TIMEOUT);
        assert_eq!(b.http_shutdown_timeout(), Duration::from_secs(2));
    }

    #[test]
    fn exempt_paths_are_plain_prefixes() {
        let config = Config::default();
        for path in [
            "/readyz",
            "/livez",
            "/healthz",
            "/metrics",
            "/healthzx",
            "/readyz/shutdown",
            "/livez?verbose",
        ] {
            assert!(config.is_exempt_path(path), "{path}");
        }
        for path in ["/api", "/", "", "/Healthz", "healthz", "/v1/healthz"] {
            assert!(!config.is_exempt_path(path), "{path}");
        }
        let none = Config::builder()
            .exempt_path_prefixes(Vec::<String>::new())
            .build()
            .unwrap();
        assert!(!none.is_exempt_path("/healthz"));
        let custom = Config::builder()
            .exempt_path_prefixes(["/status"])
            .build()
            .unwrap();
        assert!(custom.is_exempt_path("/status/ok"));
        assert!(!custom.is_exempt_path("/healthz"));
    }

    #[test]
    fn string_setter_parses_every_option() {
        let mut builder = Config::builder();
        builder
            .set(ConfigOption::ShutdownDelay, "1m30s")
            .unwrap()
            .set(ConfigOption::ShutdownSendRetryAfter, "TRUE")
            .unwrap()
            .set(ConfigOption::ShutdownWatchTerminationGracePeriod, "0")
            .unwrap()
            .set(ConfigOption::RequestTimeout, "500ms")
            .unwrap()
            .set(ConfigOption::LivezGracePeriod, "1.5h")
            .unwrap()
            .set(ConfigOption::MinWatchDrainQps, "0")
            .unwrap()
            .set(ConfigOption::ExemptPathPrefixes, "/a,/b/c")
            .unwrap();
        let config = builder.build().unwrap();
        assert_eq!(config.shutdown_delay(), Duration::from_secs(90));
        assert!(config.shutdown_send_retry_after());
        assert_eq!(
            config.shutdown_watch_termination_grace_period(),
            Duration::ZERO
        );
        assert_eq!(config.request_timeout(), Duration::from_millis(500));
        assert_eq!(config.livez_grace_period(), Duration::from_secs(5400));
        assert_eq!(config.min_watch_drain_qps(), 0);
        assert_eq!(config.exempt_path_prefixes(), ["/a", "/b/c"]);

        let mut builder = Config::builder();
        for (text, want) in [("1", true), ("0", false), ("True", true), ("fAlSe", false)] {
            builder
                .set(ConfigOption::ShutdownSendRetryAfter, text)
                .unwrap();
            assert_eq!(
                builder.clone().build().unwrap().shutdown_send_retry_after(),
                want
            );
        }
        builder.set(ConfigOption::ExemptPathPrefixes, "").unwrap();
        assert!(builder.build().unwrap().exempt_path_prefixes().is_empty());
    }

    #[test]
    fn failed_set_leaves_the_builder_unchanged() {
        let mut builder = Config::builder();
        for option in ConfigOption::ALL {
            assert!(builder.set(option, "bogus").is_err());
        }
        assert!(builder
            .set(ConfigOption::ExemptPathPrefixes, "/ok,bad")
            .is_err());
        assert_eq!(builder.build(), Ok(Config::default()));
    }

    #[test]
    fn every_error_message_names_the_flag() {
        for option in ConfigOption::ALL {
            let err = Config::builder().set(option, "bogus").unwrap_err();
            assert_eq!(err.option(), Some(option));
            let msg = err.to_string();
            assert!(msg.contains(option.flag()), "{msg}");
            assert!(msg.contains("\"bogus\""), "{msg}");
        }
    }

    #[test]
    fn error_messages() {
        let msg = |option, value: &str| {
            Config::builder()
                .set(option, value)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            msg(ConfigOption::ShutdownDelay, "abc"),
            r#"invalid value "abc" for --shutdown-delay: expected numbers with units, such as 500ms, 2s or 1m30s"#
        );
        assert_eq!(
            msg(ConfigOption::ShutdownDelay, "-1s"),
            r#"--shutdown-delay can not be a negative value (got "-1s")"#
        );
        assert_eq!(
            msg(ConfigOption::RequestTimeout, "10"),
            r#"invalid value "10" for --request-timeout: missing unit (use one of ns, us, µs, ms, s, m, h)"#
        );
        assert_eq!(
            msg(ConfigOption::LivezGracePeriod, "9999999999h"),
            r#"invalid value "9999999999h" for --livez-grace-period: longer than the maximum 2562047h47m16.854775807s"#
        );
        assert_eq!(
            msg(ConfigOption::ShutdownSendRetryAfter, "yes"),
            r#"invalid value "yes" for --shutdown-send-retry-after: expected true, false, 1 or 0"#
        );
        assert_eq!(
            msg(ConfigOption::MinWatchDrainQps, "-5"),
            r#"invalid value "-5" for --min-watch-drain-qps: expected a whole number from 0 to 4294967295"#
        );
        assert_eq!(
            msg(ConfigOption::MinWatchDrainQps, "4294967296"),
            r#"invalid value "4294967296" for --min-watch-drain-qps: expected a whole number from 0 to 4294967295"#
        );
        assert_eq!(
            msg(ConfigOption::ExemptPathPrefixes, "/a,,/b"),
            r#"invalid value "" for --exempt-path-prefix: a path prefix must start with '/'"#
        );
        assert_eq!(
            msg(ConfigOption::ExemptPathPrefixes, "/a, /b"),
            r#"invalid value " /b" for --exempt-path-prefix: a path prefix must start with '/'"#
        );
        let err = Config::builder()
            .set(ConfigOption::ShutdownDelay, "-1s")
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::InvalidDuration {
                option: ConfigOption::ShutdownDelay,
                source: DurationError::Negative { .. },
                ..
            }
        ));
    }

    #[test]
    fn build_rejects_too_large_and_bad_prefixes() {
        let max = MAX_CONFIG_DURATION;
        let over = max + Duration::from_nanos(1);
        assert!(Config::builder()
            .shutdown_delay(max)
            .request_timeout(max)
            .build()
            .is_ok());
        let setters: [fn(ConfigBuilder, Duration) -> ConfigBuilder; 4] = [
            ConfigBuilder::shutdown_delay,
            ConfigBuilder::shutdown_watch_termination_grace_period,
            ConfigBuilder::request_timeout,
            ConfigBuilder::livez_grace_period,
        ];
        let options = ConfigOption::ALL.into_iter().filter(|o| o.is_duration());
        for (setter, option) in setters.into_iter().zip(options) {
            let err = setter(Config::builder(), over).build().unwrap_err();
            assert_eq!(
                err,
                ConfigError::TooLarge {
                    option,
                    value: over,
                    max
                }
            );
            assert!(err.to_string().starts_with(option.flag()), "{err}");
        }
        assert_eq!(
            Config::builder().request_timeout(Duration::MAX).build().unwrap_err().to_string(),
            "--request-timeout can not be longer than 2562047h47m16.854775807s, got 5124095576030431h0m15.999999999s"
        );
        assert_eq!(
            Config::builder()
                .exempt_path_prefixes(["/ok", "nope"])
                .build(),
            Err(ConfigError::InvalidPathPrefix {
                option: ConfigOption::ExemptPathPrefixes,
                value: "nope".to_string()
            })
        );
        assert!(Config::builder()
            .exempt_path_prefixes([""])
            .build()
            .is_err());
        let zero = Config::builder()
            .shutdown_delay(Duration::ZERO)
            .request_timeout(Duration::ZERO)
            .min_watch_drain_qps(0)
            .build()
            .unwrap();
        assert_eq!(zero.http_shutdown_timeout(), Duration::ZERO);
    }

    #[test]
    fn option_names() {
        let flags = [
            "--shutdown-delay",
            "--shutdown-send-retry-after",
            "--shutdown-watch-termination-grace-period",
            "--request-timeout",
            "--livez-grace-period",
            "--min-watch-drain-qps",
            "--exempt-path-prefix",
        ];
        let fields = [
            "shutdown_delay",
            "shutdown_send_retry_after",
            "shutdown_watch_termination_grace_period",
            "request_timeout",
            "livez_grace_period",
            "min_watch_drain_qps",
            "exempt_path_prefixes",
        ];
        for ((option, flag), field) in ConfigOption::ALL.into_iter().zip(flags).zip(fields) {
            assert_eq!(option.flag(), flag);
            assert_eq!(option.field(), field);
            assert_eq!(option.to_string(), flag);
            assert_eq!(flag.parse(), Ok(option));
            assert_eq!(flag[2..].parse(), Ok(option));
            assert_eq!(field.parse(), Ok(option));
            assert!(!option.help().is_empty());
        }
        assert_eq!(
            "--shutdown-delay-duration".parse(),
            Ok(ConfigOption::ShutdownDelay)
        );
        assert_eq!(
            "exempt-path-prefixes".parse(),
            Ok(ConfigOption::ExemptPathPrefixes)
        );
        for bad in [
            "",
            "--",
            "-shutdown-delay",
            "--shutdown_delay_x",
            "Shutdown-Delay",
            "--listen",
        ] {
            assert_eq!(
                bad.parse::<ConfigOption>(),
                Err(ConfigError::UnknownOption {
                    name: bad.to_string()
                })
            );
        }
        assert_eq!(
            "--listen".parse::<ConfigOption>().unwrap_err().to_string(),
            r#"unknown option "--listen""#
        );
        assert_eq!(ConfigOption::ALL.iter().filter(|o| o.is_bool()).count(), 1);
    }
}
