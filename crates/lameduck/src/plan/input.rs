//! What the planner takes ([`ProbeSettings`], [`PlanInput`]) and why it may refuse it
//! ([`PlanError`]).

use core::time::Duration;

use crate::config::Config;
use crate::duration::GoDuration;

/// Kubernetes' default readiness probe period (`periodSeconds`): 10 s.
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(10);

/// Kubernetes' default probe timeout (`timeoutSeconds`): 1 s.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Kubernetes' default readiness `failureThreshold`: 3.
pub const DEFAULT_UNHEALTHY_THRESHOLD: u32 = 3;

/// How the load balancer probes `/readyz`. [`ProbeSettings::default`] holds Kubernetes'
/// readiness-probe defaults (every 10 s, 1 s timeout, 3 failures, no propagation delay).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProbeSettings {
    /// Time between the starts of two probes (AWS `HealthCheckIntervalSeconds`, Kubernetes
    /// `periodSeconds`). Must not be zero.
    pub interval: Duration,
    /// How long a probe may take before it counts as failed (`HealthCheckTimeoutSeconds`,
    /// `timeoutSeconds`). Must not be zero, nor above `interval` unless
    /// `allow_overlapping_probes` is set.
    pub timeout: Duration,
    /// Consecutive failed probes before the instance is taken out of service
    /// (`UnhealthyThresholdCount`, `failureThreshold`). Must not be zero.
    pub unhealthy_threshold: u32,
    /// Extra time for the balancer's decision to take effect (kube-proxy, endpoint sync).
    pub propagation_delay: Duration,
    /// Accept a `timeout` above `interval`, for balancers that start probes while earlier ones
    /// still run.
    pub allow_overlapping_probes: bool,
}

impl ProbeSettings {
    /// Settings with the given interval, timeout and threshold, no propagation delay and no
    /// overlapping probes.
    #[must_use]
    pub const fn new(interval: Duration, timeout: Duration, unhealthy_threshold: u32) -> Self {
        ProbeSettings {
            interval,
            timeout,
            unhealthy_threshold,
            propagation_delay: Duration::ZERO,
            allow_overlapping_probes: false,
        }
    }

    /// Sets [`ProbeSettings::propagation_delay`].
    #[must_use]
    pub const fn propagation_delay(mut self, delay: Duration) -> Self {
        self.propagation_delay = delay;
        self
    }

    /// Sets [`ProbeSettings::allow_overlapping_probes`].
    #[must_use]
    pub const fn allow_overlapping_probes(mut self, allow: bool) -> Self {
        self.allow_overlapping_probes = allow;
        self
    }

    /// Checks the settings: see [`PlanError`].
    ///
    /// # Errors
    ///
    /// The first invalid setting: interval, timeout, then threshold.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.interval.is_zero() {
            return Err(PlanError::ZeroInterval);
        }
        if self.timeout.is_zero() {
            return Err(PlanError::ZeroTimeout);
        }
        if self.timeout > self.interval && !self.allow_overlapping_probes {
            return Err(PlanError::TimeoutAboveInterval {
                timeout: self.timeout,
                interval: self.interval,
            });
        }
        if self.unhealthy_threshold == 0 {
            return Err(PlanError::ZeroThreshold);
        }
        Ok(())
    }

    /// The worst-case time from `/readyz` turning red to the instance being out of service:
    /// `unhealthy_threshold × interval + timeout + propagation_delay`.
    ///
    /// # Errors
    ///
    /// [`ProbeSettings::validate`]'s errors, or [`PlanError::Overflow`].
    pub fn detection_worst_case(&self) -> Result<Duration, PlanError> {
        self.validate()?;
        self.interval
            .checked_mul(self.unhealthy_threshold)
            .and_then(|d| d.checked_add(self.timeout))
            .and_then(|d| d.checked_add(self.propagation_delay))
            .ok_or(PlanError::Overflow)
    }
}

impl Default for ProbeSettings {
    fn default() -> Self {
        ProbeSettings::new(
            DEFAULT_PROBE_INTERVAL,
            DEFAULT_PROBE_TIMEOUT,
            DEFAULT_UNHEALTHY_THRESHOLD,
        )
    }
}

/// Everything [`plan`](super::plan()) needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanInput {
    /// How the load balancer probes `/readyz`.
    pub probes: ProbeSettings,
    /// The shutdown configuration: shutdown delay, request timeout, watch grace period, mode.
    pub config: Config,
    /// How long the longest pre-shutdown hook may run. Default zero.
    pub pre_shutdown_hooks: Duration,
    /// Kubernetes' `terminationGracePeriodSeconds`, if the total should be checked against it.
    /// Default `None`: the total and a suggested value are computed but not checked.
    pub termination_grace_period: Option<Duration>,
}

impl PlanInput {
    /// Input without pre-shutdown hooks and without a termination budget.
    #[must_use]
    pub fn new(probes: ProbeSettings, config: Config) -> Self {
        PlanInput {
            probes,
            config,
            pre_shutdown_hooks: Duration::ZERO,
            termination_grace_period: None,
        }
    }

    /// Sets [`PlanInput::pre_shutdown_hooks`].
    #[must_use]
    pub fn pre_shutdown_hooks(mut self, longest: Duration) -> Self {
        self.pre_shutdown_hooks = longest;
        self
    }

    /// Sets [`PlanInput::termination_grace_period`].
    #[must_use]
    pub fn termination_grace_period(mut self, budget: Duration) -> Self {
        self.termination_grace_period = Some(budget);
        self
    }
}

/// Why [`plan`](super::plan()) refused its input. Each message names the `lameduck plan`
/// flag to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// [`ProbeSettings::interval`] is zero.
    #[error("--probe-interval must be greater than zero")]
    ZeroInterval,
    /// [`ProbeSettings::timeout`] is zero.
    #[error("--probe-timeout must be greater than zero")]
    ZeroTimeout,
    /// [`ProbeSettings::timeout`] is above the interval and overlapping probes are not allowed.
    #[error(
        "--probe-timeout ({}) can not be longer than --probe-interval ({}): most load balancers \
         run one probe at a time (pass --overlapping-probes if yours starts probes while \
         earlier ones still run)",
        GoDuration(*.timeout),
        GoDuration(*.interval)
    )]
    TimeoutAboveInterval {
        /// The probe timeout.
        timeout: Duration,
        /// The probe interval.
        interval: Duration,
    },
    /// [`ProbeSettings::unhealthy_threshold`] is zero.
    #[error("--unhealthy-threshold must be at least 1")]
    ZeroThreshold,
    /// A sum or product of the durations does not fit in a [`Duration`].
    #[error(
        "the worst-case times overflow: check --probe-interval, --unhealthy-threshold and the \
         other durations"
    )]
    Overflow,
}

impl PlanError {
    /// The `lameduck plan` flag the error is about (`None` for [`PlanError::Overflow`]).
    #[must_use]
    pub const fn flag(&self) -> Option<&'static str> {
        match self {
            PlanError::ZeroInterval => Some("--probe-interval"),
            PlanError::ZeroTimeout | PlanError::TimeoutAboveInterval { .. } => {
                Some("--probe-timeout")
            }
            PlanError::ZeroThreshold => Some("--unhealthy-threshold"),
            PlanError::Overflow => None,
        }
    }
}

pub(super) fn add(a: Duration, b: Duration) -> Result<Duration, PlanError> {
    a.checked_add(b).ok_or(PlanError::Overflow)
}

pub(super) fn mul(a: Duration, b: u32) -> Result<Duration, PlanError> {
    a.checked_mul(b).ok_or(PlanError::Overflow)
}
