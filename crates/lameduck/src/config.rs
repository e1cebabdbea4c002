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
use core::time::Duration;

use crate::duration::{parse_duration, MAX_DURATION};

mod chance;
mod draw;
mod exempt;
mod option;

use exempt::ExemptFilter;

pub use self::chance::GoawayChance;
pub use self::option::{ConfigError, ConfigOption};

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

/// The HTTP shutdown timeout in retry-after mode ([`ShutdownMode::SendRetryAfter`]), as
/// kube-apiserver: requests have drained by the time the listener stops, so two seconds is
/// enough.
pub const MODE_B_HTTP_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// Default of [`Config::late_arrival_percent`]: a connection in the last 20 % of the shutdown
/// delay is late.
pub const DEFAULT_LATE_ARRIVAL_PERCENT: u8 = 20;

/// How new requests are refused once [`crate::LifecycleSignal::NotAcceptingNewRequest`] fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ShutdownMode {
    /// Close-listener mode (the default): the listener closes at `NotAcceptingNewRequest`.
    #[default]
    CloseListener,
    /// Retry-after mode (`shutdown_send_retry_after`): the server keeps listening and answers
    /// `429` with `Retry-After` until in-flight requests have drained, then closes the listener.
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
    goaway_chance: GoawayChance,
    idle_close_spread: Duration,
    max_connection_age: Duration,
    max_connection_age_grace: Duration,
    late_arrival_percent: u8,
    /// Derived from `exempt_path_prefixes` (by `Default` and `ConfigBuilder::build`): rules
    /// most paths out before the prefixes are compared.
    exempt_filter: ExemptFilter,
}

impl Default for Config {
    fn default() -> Self {
        let exempt_path_prefixes: Vec<String> = DEFAULT_EXEMPT_PATH_PREFIXES
            .iter()
            .map(|p| String::from(*p))
            .collect();
        Config {
            exempt_filter: ExemptFilter::new(&exempt_path_prefixes),
            shutdown_delay: Duration::ZERO,
            shutdown_send_retry_after: false,
            shutdown_watch_termination_grace_period: Duration::ZERO,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            livez_grace_period: Duration::ZERO,
            min_watch_drain_qps: DEFAULT_MIN_WATCH_DRAIN_QPS,
            exempt_path_prefixes,
            goaway_chance: GoawayChance::OFF,
            idle_close_spread: Duration::ZERO,
            max_connection_age: Duration::ZERO,
            max_connection_age_grace: Duration::ZERO,
            late_arrival_percent: DEFAULT_LATE_ARRIVAL_PERCENT,
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

    /// Whether retry-after mode is on (see [`ShutdownMode::SendRetryAfter`]). Default false.
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

    /// How long stopping the HTTP listener may take: [`Config::request_timeout`] in
    /// close-listener mode, [`MODE_B_HTTP_SHUTDOWN_TIMEOUT`] (2s) in retry-after mode, as
    /// kube-apiserver.
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

    /// The probability that an admitted request (exempt paths excepted) ends its connection
    /// gracefully after its response, for clients behind L4 balancers. Default
    /// [`GoawayChance::OFF`].
    #[must_use]
    pub fn goaway_chance(&self) -> GoawayChance {
        self.goaway_chance
    }

    /// The window over which the connections idle when the server stops listening are closed
    /// (HTTP/1) or told GOAWAY (HTTP/2), each at its own uniformly random point, instead of all
    /// at once, so that their clients do not all reconnect elsewhere in the same millisecond
    /// (HAProxy's `close-spread-time`). Default 0: off, every idle connection ends at the stop,
    /// as kube-apiserver's do. Shorter than the [HTTP shutdown
    /// timeout](Config::http_shutdown_timeout) when that is set ([`ConfigBuilder::build`]
    /// checks), so every connection ends before the server stops waiting for them.
    ///
    /// A request that arrives on such a connection before its point is admitted as any
    /// request after the stop ([`Shared::admit_on`](crate::Shared::admit_on)), and the
    /// connection ends after its response; a connection busy with a request at the stop ends
    /// after that response, as without the spread. See
    /// [`Shared::spread_close_at`](crate::Shared::spread_close_at).
    #[must_use]
    pub fn idle_close_spread(&self) -> Duration {
        self.idle_close_spread
    }

    /// The age at which each connection is ended gracefully, so that long-lived clients
    /// behind layer-4 balancers move to newer instances (gRPC's `MAX_CONNECTION_AGE`, Envoy's
    /// `max_connection_duration`): HTTP/1 answers its next response with `Connection: close`,
    /// or closes the connection when it is idle; HTTP/2 sends the two-step GOAWAY. Each
    /// connection's own age is drawn within ±10 % of this
    /// ([`Config::connection_age_limit`]), so that connections opened together do not all end
    /// together. Default 0: off.
    #[must_use]
    pub fn max_connection_age(&self) -> Duration {
        self.max_connection_age
    }

    /// How long the streams of a connection that reached its
    /// [age](Config::max_connection_age) get to end before the connection is cut (gRPC's
    /// `MAX_CONNECTION_AGE_GRACE`). Default 0: no bound of its own, the streams keep their own
    /// bounds (the [request timeout](Config::request_timeout), the [long-running
    /// grace](Config::shutdown_watch_termination_grace_period)).
    #[must_use]
    pub fn max_connection_age_grace(&self) -> Duration {
        self.max_connection_age_grace
    }

    /// The last part of the shutdown delay, in percent, in which a new connection or request
    /// is *late*: the balancer barely stopped in time (see
    /// [`Counters::arrivals`](crate::shared::counters::Counters::arrivals)). Default
    /// [`DEFAULT_LATE_ARRIVAL_PERCENT`].
    #[must_use]
    pub fn late_arrival_percent(&self) -> u8 {
        self.late_arrival_percent
    }

    /// How long after `ShutdownInitiated` the late part of the shutdown delay begins.
    #[must_use]
    pub fn late_arrivals_from(&self) -> Duration {
        let early = u32::from(100 - self.late_arrival_percent.min(100));
        self.shutdown_delay * early / 100
    }

    /// Whether a request for `path` (without the query) is exempt from rejection.
    ///
    /// This is a plain prefix match, as kube-apiserver does it, so with the defaults
    /// `/healthz/ping` and also `/healthzx` are exempt while `/api` is not.
    #[must_use]
    #[inline]
    pub fn is_exempt_path(&self, path: &str) -> bool {
        self.exempt_filter.may_match(path)
            && self
                .exempt_path_prefixes
                .iter()
                .any(|prefix| path.starts_with(prefix.as_str()))
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

    /// Sets [`Config::shutdown_send_retry_after`] (retry-after mode when true).
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

    /// Sets [`Config::goaway_chance`] (a [`GoawayChance`] is in range by construction).
    #[must_use]
    pub fn goaway_chance(mut self, value: GoawayChance) -> Self {
        self.config.goaway_chance = value;
        self
    }

    /// Sets [`Config::idle_close_spread`]; zero turns it off. It must be shorter than the
    /// HTTP shutdown timeout when that is set, which [`ConfigBuilder::build`] checks.
    #[must_use]
    pub fn idle_close_spread(mut self, value: Duration) -> Self {
        self.config.idle_close_spread = value;
        self
    }

    /// Sets [`Config::max_connection_age`]; zero turns it off.
    #[must_use]
    pub fn max_connection_age(mut self, value: Duration) -> Self {
        self.config.max_connection_age = value;
        self
    }

    /// Sets [`Config::max_connection_age_grace`]; zero means no bound beyond the requests' own.
    #[must_use]
    pub fn max_connection_age_grace(mut self, value: Duration) -> Self {
        self.config.max_connection_age_grace = value;
        self
    }

    /// Sets [`Config::late_arrival_percent`], from 0 to 100 (which [`ConfigBuilder::build`]
    /// checks).
    #[must_use]
    pub fn late_arrival_percent(mut self, percent: u8) -> Self {
        self.config.late_arrival_percent = percent;
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
    /// - [`ConfigOption::GoawayChance`]: a decimal probability from 0 to 0.02.
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
            ConfigOption::IdleCloseSpread => self.config.idle_close_spread = duration()?,
            ConfigOption::MaxConnectionAge => self.config.max_connection_age = duration()?,
            ConfigOption::MaxConnectionAgeGrace => {
                self.config.max_connection_age_grace = duration()?;
            }
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
            ConfigOption::GoawayChance => self.config.goaway_chance = value.parse()?,
        }
        Ok(self)
    }

    /// Validates the values: every duration at most [`MAX_CONFIG_DURATION`], every path prefix
    /// starting with `/`, the idle-close spread shorter than the HTTP shutdown timeout (when
    /// that is set).
    ///
    /// # Errors
    ///
    /// The first invalid option, in [`ConfigOption::ALL`] order.
    pub fn build(self) -> Result<Config, ConfigError> {
        let mut config = self.config;
        let durations = [
            (ConfigOption::ShutdownDelay, config.shutdown_delay),
            (
                ConfigOption::ShutdownWatchTerminationGracePeriod,
                config.shutdown_watch_termination_grace_period,
            ),
            (ConfigOption::RequestTimeout, config.request_timeout),
            (ConfigOption::LivezGracePeriod, config.livez_grace_period),
            (ConfigOption::IdleCloseSpread, config.idle_close_spread),
            (ConfigOption::MaxConnectionAge, config.max_connection_age),
            (
                ConfigOption::MaxConnectionAgeGrace,
                config.max_connection_age_grace,
            ),
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
        let http_shutdown_timeout = config.http_shutdown_timeout();
        if !config.idle_close_spread.is_zero()
            && !http_shutdown_timeout.is_zero()
            && config.idle_close_spread >= http_shutdown_timeout
        {
            return Err(ConfigError::SpreadNotShorter {
                option: ConfigOption::IdleCloseSpread,
                value: config.idle_close_spread,
                http_shutdown_timeout,
            });
        }
        if config.late_arrival_percent > 100 {
            return Err(ConfigError::LateArrivalPercent {
                value: config.late_arrival_percent,
            });
        }
        config.exempt_filter = ExemptFilter::new(&config.exempt_path_prefixes);
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
mod tests;
