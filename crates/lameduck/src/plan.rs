//! The shutdown planner: does the load balancer stop sending requests before the server stops
//! accepting them, and does the whole termination fit in Kubernetes'
//! `terminationGracePeriodSeconds`?
//!
//! Most requests dropped in rolling updates come from a shutdown delay shorter than the time a
//! load balancer needs to notice that `/readyz` turned red. [`plan`] computes that time for
//! given [`ProbeSettings`] and a shutdown [`Config`], checks it against the shutdown delay,
//! computes the worst-case total termination time, and lays the whole sequence out as a
//! [`Plan::timeline`]. It is pure arithmetic: no clock, no I/O, no panics. The `lameduck plan`
//! command of the `lameduck-cli` crate prints and draws the result.
//!
//! # The model
//!
//! All times are offsets from the stop signal (**E1**, `ShutdownInitiated`). `/readyz` turns red
//! at once (**E2** = E1).
//!
//! **Detection.** The worst case for the load balancer is a probe answered successfully just
//! before E2 (**P0**). The next probe starts at most one `interval` later, and the balancer takes
//! the instance out of service after `unhealthy_threshold` consecutive failures, probe **Pk**
//! starting at `k × interval` and, at worst, running to its full `timeout` before it counts as
//! failed. Then the decision needs `propagation_delay` more to reach the data path
//! (kube-proxy rules, endpoint sync, a cloud balancer's control plane):
//!
//! ```text
//! t = unhealthy_threshold × interval + timeout + propagation_delay
//! ```
//!
//! An AWS load balancer probing every 10 s with a 10 s timeout and an unhealthy threshold of 2:
//! P1 starts at 10 s, P2 at 20 s and fails at 30 s, so `t = 2 × 10 s + 10 s = 30 s`.
//!
//! **The check.** New requests are accepted until **E3**, `NotAcceptingNewRequest`: in mode A
//! the listener closes there, in mode B new requests get `429` from there. E3 fires when the
//! shutdown delay has passed *and* the pre-shutdown hooks have stopped. Hooks may end early, so
//! only the shutdown delay is guaranteed, and the plan is safe when `E2 + t <= E3`, that is
//! `t <= shutdown_delay`. The minimum safe shutdown delay is `t`.
//!
//! **Probe timeouts above the interval** are rejected ([`PlanError::TimeoutAboveInterval`]):
//! most balancers run one probe at a time per target, and some forbid it (AWS requires the
//! timeout to be shorter than the interval for several target-group types). A balancer that
//! does start probes while earlier ones still run can be described with
//! [`ProbeSettings::allow_overlapping_probes`]; the formula above still bounds it, as the
//! `k`-th probe still starts at `k × interval`.
//!
//! **Total termination time**, at worst, with `E3w = max(shutdown_delay, pre_shutdown_hooks)`
//! (the latest E3). Every normal request is released at the latest `request_timeout` after
//! its admission (504, or its response aborted), so the normal drain ends by
//! `E3w + request_timeout`; long-running requests are bounded by their grace period only:
//!
//! * mode A: `E3w + max(request_timeout, watch_grace)`; the listener closes at E3w and its
//!   HTTP shutdown timeout (`request_timeout`) closes nothing when it expires, so the exit
//!   waits for the longer of the two drains;
//! * mode B: `E3w + max(request_timeout, watch_grace) + 2 s`: the listener closes after the
//!   drain, with the 2 s HTTP shutdown timeout of mode B ([`MODE_B_HTTP_SHUTDOWN_TIMEOUT`]).
//!
//! A zero `request_timeout` means normal requests are waited for without a bound, so the total
//! has none either ([`Plan::total_worst_case`] is `None`).
//!
//! **The Kubernetes budget.** When a `terminationGracePeriodSeconds` is given, the total must fit
//! in it; Kubernetes sends `SIGKILL` when it runs out. The suggested value is the total rounded
//! up to whole seconds plus [`GRACE_PERIOD_MARGIN`] (5 s), for the time the process needs to
//! start exiting and for scheduling noise.
//!
//! ```
//! use core::time::Duration;
//! use lameduck::plan::{plan, PlanInput, ProbeSettings};
//! use lameduck::Config;
//!
//! let probes = ProbeSettings::new(Duration::from_secs(10), Duration::from_secs(10), 2);
//! let config = Config::builder()
//!     .shutdown_delay(Duration::from_secs(20))
//!     .request_timeout(Duration::from_secs(10))
//!     .build()?;
//! let p = plan(&PlanInput::new(probes, config))?;
//! assert_eq!(p.detection_worst_case, Duration::from_secs(30));
//! assert!(!p.is_safe());
//! assert_eq!(p.min_safe_shutdown_delay, Duration::from_secs(30));
//! assert_eq!(p.total_worst_case, Some(Duration::from_secs(20 + 10)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The Kubernetes Service path is different: endpoints of a terminating pod are removed when
//! the pod is deleted, whatever `/readyz` says, so there the propagation delay dominates. Model
//! it with a `propagation_delay` of a few seconds.
//!
//! [`MODE_B_HTTP_SHUTDOWN_TIMEOUT`]: crate::config::MODE_B_HTTP_SHUTDOWN_TIMEOUT

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::config::{Config, ShutdownMode, MODE_B_HTTP_SHUTDOWN_TIMEOUT};
use crate::duration::GoDuration;

/// Kubernetes' default `terminationGracePeriodSeconds`: 30 s.
pub const DEFAULT_TERMINATION_GRACE_PERIOD: Duration = Duration::from_secs(30);

/// Added to the worst-case total (rounded up to whole seconds) for
/// [`Plan::suggested_termination_grace_period`]: 5 s.
pub const GRACE_PERIOD_MARGIN: Duration = Duration::from_secs(5);

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

/// Everything [`plan`] needs.
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

/// Why [`plan`] refused its input. Each message names the `lameduck plan` flag to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
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

/// Why a plan is unsafe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Problem {
    /// The load balancer may still send new requests after the server stopped accepting them:
    /// `detection > shutdown_delay`.
    DetectionAfterStopAccepting {
        /// The worst-case detection time `t`.
        detection: Duration,
        /// The configured shutdown delay.
        shutdown_delay: Duration,
    },
    /// The worst-case total termination time exceeds `terminationGracePeriodSeconds`, so
    /// Kubernetes may kill the process mid-drain.
    ExceedsTerminationGracePeriod {
        /// The worst-case total.
        total: Duration,
        /// The budget given.
        termination_grace_period: Duration,
    },
    /// A zero request timeout lets the normal drain run without a bound, so no
    /// `terminationGracePeriodSeconds` is sure to be enough.
    UnboundedDrain {
        /// The budget given.
        termination_grace_period: Duration,
    },
}

impl Problem {
    /// A short machine-readable name, such as `detection_after_stop_accepting`.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Problem::DetectionAfterStopAccepting { .. } => "detection_after_stop_accepting",
            Problem::ExceedsTerminationGracePeriod { .. } => "exceeds_termination_grace_period",
            Problem::UnboundedDrain { .. } => "unbounded_drain",
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Problem::DetectionAfterStopAccepting {
                detection,
                shutdown_delay,
            } => write!(
                f,
                "the load balancer may take {} to stop sending requests, but the server stops \
                 accepting them after the shutdown delay of {}: requests sent in the last {} \
                 fail; the minimum safe shutdown delay is {}",
                GoDuration(detection),
                GoDuration(shutdown_delay),
                GoDuration(detection.saturating_sub(shutdown_delay)),
                GoDuration(detection)
            ),
            Problem::ExceedsTerminationGracePeriod {
                total,
                termination_grace_period,
            } => write!(
                f,
                "the worst-case termination takes {} but terminationGracePeriodSeconds is {}: \
                 Kubernetes may kill the process while it drains",
                GoDuration(total),
                GoDuration(termination_grace_period)
            ),
            Problem::UnboundedDrain {
                termination_grace_period,
            } => write!(
                f,
                "--request-timeout 0 lets the drain run without a bound, so \
                 terminationGracePeriodSeconds ({}) may run out while requests are in flight",
                GoDuration(termination_grace_period)
            ),
        }
    }
}

/// What a [`TimelineEvent`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// E1: the stop signal, `ShutdownInitiated`.
    Signal,
    /// E2: `/readyz` turns red.
    ReadinessRed,
    /// P0: the last successful probe, just before E2.
    ProbeOk,
    /// A failing probe, from its start for at most its timeout.
    ProbeFails {
        /// 1 for P1, up to the unhealthy threshold.
        index: u32,
    },
    /// Failing probes `first..=last` in the middle of a long run, as one span from the first
    /// one's start to the last one's timeout (see [`MAX_LISTED_PROBES`]).
    ProbesFail {
        /// The first probe of the span.
        first: u32,
        /// The last probe of the span.
        last: u32,
    },
    /// The propagation delay after the last failing probe.
    Propagation,
    /// The load balancer has taken the instance out of service (worst case).
    OutOfService,
    /// The lame-duck window, from E1 to `AfterShutdownDelayDuration`: `/readyz` red, requests
    /// served.
    LameDuck,
    /// The pre-shutdown hooks, from E1 until `PreShutdownHooksStopped` at the latest.
    PreShutdownHooks,
    /// E3: `NotAcceptingNewRequest`.
    StopAccepting,
    /// The drain of normal requests (at most `request_timeout` + 1 s).
    NormalDrain,
    /// The drain of long-running requests (at most the watch grace period).
    LongRunningDrain,
    /// `InFlightRequestsDrained`, at the latest.
    Drained,
    /// The listener closes (mode B: after the drain; mode A closes it at E3).
    StopListening,
    /// The HTTP server's shutdown timeout after the listener closes (mode B: 2 s).
    HttpShutdown,
    /// The process exits, at the latest.
    Exit,
    /// Kubernetes sends `SIGKILL`: `terminationGracePeriodSeconds` after E1.
    Kill,
}

impl EventKind {
    /// A short machine-readable name, such as `probe_fails`.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            EventKind::Signal => "signal",
            EventKind::ReadinessRed => "readiness_red",
            EventKind::ProbeOk => "probe_ok",
            EventKind::ProbeFails { .. } => "probe_fails",
            EventKind::ProbesFail { .. } => "probes_fail",
            EventKind::Propagation => "propagation",
            EventKind::OutOfService => "out_of_service",
            EventKind::LameDuck => "lame_duck",
            EventKind::PreShutdownHooks => "pre_shutdown_hooks",
            EventKind::StopAccepting => "stop_accepting",
            EventKind::NormalDrain => "normal_drain",
            EventKind::LongRunningDrain => "long_running_drain",
            EventKind::Drained => "drained",
            EventKind::StopListening => "stop_listening",
            EventKind::HttpShutdown => "http_shutdown",
            EventKind::Exit => "exit",
            EventKind::Kill => "kill",
        }
    }
}

/// One moment (or, with a non-zero `duration`, one span) of the worst-case timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineEvent {
    /// When it happens (a span: when it starts), from the stop signal E1.
    pub at: Duration,
    /// How long it lasts; zero for a moment. Spans with no bound (the normal drain with a
    /// zero request timeout) have zero length and say so in their label.
    pub duration: Duration,
    /// A short tag: `E1`, `E2`, `E3`, `P0`, `P1`…, `LB`, `EXIT`, …
    pub tag: String,
    /// What happens, for people.
    pub label: String,
    /// What it is, for programs.
    pub kind: EventKind,
}

impl TimelineEvent {
    /// When it ends: `at + duration` (saturating).
    #[must_use]
    pub fn end(&self) -> Duration {
        self.at.saturating_add(self.duration)
    }
}

/// The result of [`plan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The shutdown mode of the configuration.
    pub mode: ShutdownMode,
    /// `t`: the worst-case time from `/readyz` turning red (E2) until the load balancer stops
    /// sending requests.
    pub detection_worst_case: Duration,
    /// The configured shutdown delay: the earliest E3 (`NotAcceptingNewRequest`) after E1.
    pub shutdown_delay: Duration,
    /// The latest E3: `max(shutdown_delay, pre_shutdown_hooks)`.
    pub stop_accepting_worst_case: Duration,
    /// The smallest shutdown delay that makes the detection check pass: `t`.
    pub min_safe_shutdown_delay: Duration,
    /// The longest the normal drain may take: `request_timeout + 1 s`, `None` without a
    /// request timeout.
    pub normal_drain_worst_case: Option<Duration>,
    /// The worst-case time from E1 to the process exiting; `None` when the drain has no bound
    /// (zero request timeout).
    pub total_worst_case: Option<Duration>,
    /// The budget checked, if one was given.
    pub termination_grace_period: Option<Duration>,
    /// `total_worst_case` rounded up to whole seconds plus [`GRACE_PERIOD_MARGIN`]; `None` when
    /// the total has no bound.
    pub suggested_termination_grace_period: Option<Duration>,
    /// Why the plan is unsafe; empty when it is safe.
    pub problems: Vec<Problem>,
    /// Every event of the worst case, ordered by `at` (ties in causal order).
    pub timeline: Vec<TimelineEvent>,
}

impl Plan {
    /// Whether the plan has no [`Problem`].
    #[must_use]
    pub fn is_safe(&self) -> bool {
        self.problems.is_empty()
    }

    /// When the load balancer has taken the instance out of service (E2 + t; E2 = E1).
    #[must_use]
    pub fn out_of_service_at(&self) -> Duration {
        self.detection_worst_case
    }
}

/// `d` rounded up to whole seconds (saturating).
#[must_use]
pub fn ceil_seconds(d: Duration) -> u64 {
    if d.subsec_nanos() == 0 {
        d.as_secs()
    } else {
        d.as_secs().saturating_add(1)
    }
}

/// Plans the shutdown: see the [module documentation](self) for the model.
///
/// # Errors
///
/// A [`PlanError`] naming the invalid probe setting, or [`PlanError::Overflow`] when a sum
/// does not fit in a [`Duration`].
pub fn plan(input: &PlanInput) -> Result<Plan, PlanError> {
    let probes = &input.probes;
    let config = &input.config;
    let detection = probes.detection_worst_case()?;
    let mode = config.mode();
    let shutdown_delay = config.shutdown_delay();
    let hooks = input.pre_shutdown_hooks;
    let e3 = shutdown_delay.max(hooks);
    let request_timeout = config.request_timeout();
    let grace = config.shutdown_watch_termination_grace_period();

    let normal_drain = if request_timeout.is_zero() {
        None
    } else {
        Some(request_timeout)
    };
    let drained_at = match normal_drain {
        Some(normal) => Some(add(e3, normal.max(grace))?),
        None => None,
    };
    let total = match (drained_at, mode) {
        (Some(d), ShutdownMode::CloseListener) => Some(d),
        (Some(d), ShutdownMode::SendRetryAfter) => Some(add(d, MODE_B_HTTP_SHUTDOWN_TIMEOUT)?),
        (None, _) => None,
    };
    let suggested = match total {
        Some(t) => Some(add(
            Duration::from_secs(ceil_seconds(t)),
            GRACE_PERIOD_MARGIN,
        )?),
        None => None,
    };

    let mut problems = Vec::new();
    if detection > shutdown_delay {
        problems.push(Problem::DetectionAfterStopAccepting {
            detection,
            shutdown_delay,
        });
    }
    if let Some(budget) = input.termination_grace_period {
        match total {
            Some(total) if total > budget => {
                problems.push(Problem::ExceedsTerminationGracePeriod {
                    total,
                    termination_grace_period: budget,
                })
            }
            Some(_) => {}
            None => problems.push(Problem::UnboundedDrain {
                termination_grace_period: budget,
            }),
        }
    }

    let timeline = timeline(input, detection, e3, normal_drain, drained_at, total)?;
    Ok(Plan {
        mode,
        detection_worst_case: detection,
        shutdown_delay,
        stop_accepting_worst_case: e3,
        min_safe_shutdown_delay: detection,
        normal_drain_worst_case: normal_drain,
        total_worst_case: total,
        termination_grace_period: input.termination_grace_period,
        suggested_termination_grace_period: suggested,
        problems,
        timeline,
    })
}

fn add(a: Duration, b: Duration) -> Result<Duration, PlanError> {
    a.checked_add(b).ok_or(PlanError::Overflow)
}

fn mul(a: Duration, b: u32) -> Result<Duration, PlanError> {
    a.checked_mul(b).ok_or(PlanError::Overflow)
}

/// With more failing probes than this, the timeline lists the first
/// [`LISTED_PROBES_HEAD`] and the last [`LISTED_PROBES_TAIL`] and one
/// [`EventKind::ProbesFail`] span for those between.
pub const MAX_LISTED_PROBES: u32 = 10;

/// Failing probes listed one by one at the start of a long run; see [`MAX_LISTED_PROBES`].
pub const LISTED_PROBES_HEAD: u32 = 5;

/// Failing probes listed one by one at the end of a long run; see [`MAX_LISTED_PROBES`].
pub const LISTED_PROBES_TAIL: u32 = 2;

/// Builds the worst-case timeline; the times were computed (and checked) by [`plan`].
fn timeline(
    input: &PlanInput,
    detection: Duration,
    e3: Duration,
    normal_drain: Option<Duration>,
    drained_at: Option<Duration>,
    total: Option<Duration>,
) -> Result<Vec<TimelineEvent>, PlanError> {
    let probes = &input.probes;
    let config = &input.config;
    let mode = config.mode();
    let delay = config.shutdown_delay();
    let hooks = input.pre_shutdown_hooks;
    let grace = config.shutdown_watch_termination_grace_period();
    let mut events = Vec::new();
    let mut push = |at: Duration, duration: Duration, tag: &str, label: String, kind| {
        events.push(TimelineEvent {
            at,
            duration,
            tag: String::from(tag),
            label,
            kind,
        });
    };
    let z = Duration::ZERO;

    push(
        z,
        z,
        "E1",
        String::from("stop signal (SIGTERM): ShutdownInitiated"),
        EventKind::Signal,
    );
    push(
        z,
        z,
        "E2",
        String::from("/readyz turns red (500); requests are still served"),
        EventKind::ReadinessRed,
    );
    push(
        z,
        z,
        "P0",
        String::from("last successful probe, answered just before E2"),
        EventKind::ProbeOk,
    );
    push(
        z,
        delay,
        "LD",
        format!(
            "lame-duck window (shutdown delay {}): /readyz red, requests served",
            GoDuration(delay)
        ),
        EventKind::LameDuck,
    );
    if !hooks.is_zero() {
        push(
            z,
            hooks,
            "HK",
            format!(
                "pre-shutdown hooks run (at most {}); PreShutdownHooksStopped at the end",
                GoDuration(hooks)
            ),
            EventKind::PreShutdownHooks,
        );
    }
    let threshold = probes.unhealthy_threshold;
    let listed = |index: u32| {
        index <= LISTED_PROBES_HEAD || index > threshold.saturating_sub(LISTED_PROBES_TAIL)
    };
    let mut index = 1;
    while index <= threshold {
        let start = mul(probes.interval, index)?;
        if threshold > MAX_LISTED_PROBES && !listed(index) {
            // The middle of a long run of failing probes, as one span.
            let last = threshold.saturating_sub(LISTED_PROBES_TAIL);
            let end = add(mul(probes.interval, last)?, probes.timeout)?;
            push(
                start,
                end.saturating_sub(start),
                &format!("P{index}..P{last}"),
                format!(
                    "probes {index} to {last} of {threshold} fail, one every {}",
                    GoDuration(probes.interval)
                ),
                EventKind::ProbesFail { first: index, last },
            );
            index = last.saturating_add(1);
            continue;
        }
        let fails_by = add(start, probes.timeout)?;
        push(
            start,
            probes.timeout,
            &format!("P{index}"),
            format!(
                "probe {index} of {threshold} fails (by {} at the latest)",
                GoDuration(fails_by)
            ),
            EventKind::ProbeFails { index },
        );
        match index.checked_add(1) {
            Some(next) => index = next,
            None => break,
        }
    }
    if !probes.propagation_delay.is_zero() {
        push(
            detection.saturating_sub(probes.propagation_delay),
            probes.propagation_delay,
            "PD",
            format!(
                "propagation delay {}: the decision reaches the data path",
                GoDuration(probes.propagation_delay)
            ),
            EventKind::Propagation,
        );
    }
    push(
        detection,
        z,
        "LB",
        format!(
            "out of service: no new requests from the load balancer (worst case, t = {})",
            GoDuration(detection)
        ),
        EventKind::OutOfService,
    );
    let e3_label = match mode {
        ShutdownMode::CloseListener => "NotAcceptingNewRequest: the listener closes",
        ShutdownMode::SendRetryAfter => "NotAcceptingNewRequest: new requests get 429",
    };
    let e3_label = if hooks > delay {
        format!("{e3_label} (at the latest; after the hooks)")
    } else {
        String::from(e3_label)
    };
    push(e3, z, "E3", e3_label, EventKind::StopAccepting);
    match normal_drain {
        Some(normal) => push(
            e3,
            normal,
            "DN",
            format!(
                "drain of normal requests (at most the request timeout {})",
                GoDuration(config.request_timeout()),
            ),
            EventKind::NormalDrain,
        ),
        None => push(
            e3,
            z,
            "DN",
            String::from("drain of normal requests: no bound (--request-timeout 0)"),
            EventKind::NormalDrain,
        ),
    }
    if !grace.is_zero() {
        push(
            e3,
            grace,
            "DW",
            format!(
                "long-running requests end at a paced rate (at most {})",
                GoDuration(grace)
            ),
            EventKind::LongRunningDrain,
        );
    }
    if let Some(drained) = drained_at {
        push(
            drained,
            z,
            "DR",
            String::from("InFlightRequestsDrained (at the latest)"),
            EventKind::Drained,
        );
        if mode == ShutdownMode::SendRetryAfter {
            push(
                drained,
                z,
                "SL",
                String::from("the listener closes: HTTPServerStoppedListening"),
                EventKind::StopListening,
            );
            push(
                drained,
                MODE_B_HTTP_SHUTDOWN_TIMEOUT,
                "HS",
                format!(
                    "HTTP server shutdown (at most {})",
                    GoDuration(MODE_B_HTTP_SHUTDOWN_TIMEOUT)
                ),
                EventKind::HttpShutdown,
            );
        }
    }
    if let Some(total) = total {
        push(
            total,
            z,
            "EXIT",
            String::from("the process exits (at the latest)"),
            EventKind::Exit,
        );
    }
    if let Some(budget) = input.termination_grace_period {
        push(
            budget,
            z,
            "KILL",
            format!(
                "SIGKILL if still running: terminationGracePeriodSeconds ({}) ends",
                GoDuration(budget)
            ),
            EventKind::Kill,
        );
    }
    // Stable: ties keep the causal order they were pushed in.
    events.sort_by_key(|e| e.at);
    Ok(events)
}
