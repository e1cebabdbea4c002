//! The shutdown planner: does the load balancer stop sending requests before the server stops
//! accepting them, and does the whole termination fit in Kubernetes'
//! `terminationGracePeriodSeconds`?
//!
//! Most requests dropped in rolling updates come from a shutdown delay shorter than the time a
//! load balancer needs to notice that `/readyz` turned red. [`plan`] computes that time for
//! given [`ProbeSettings`] and a shutdown [`Config`](crate::Config), checks it against the
//! shutdown delay, computes the worst-case total termination time, and lays the whole
//! sequence out as a [`Plan::timeline`]. It is pure arithmetic: no clock, no I/O, no panics. The `lameduck plan`
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
//! **The check.** New requests are accepted until **E3**, `NotAcceptingNewRequest`: in
//! close-listener mode the listener closes there, in retry-after mode new requests get `429`
//! from there. E3 fires when the shutdown delay has passed *and* the pre-shutdown hooks have
//! stopped. Hooks may end early, so only the shutdown delay is guaranteed, and the plan is safe
//! when `E2 + t <= E3`, that is `t <= shutdown_delay`. The minimum safe shutdown delay is `t`.
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
//! * close-listener mode: `E3w + max(request_timeout, watch_grace)`; the listener closes at
//!   E3w and its HTTP shutdown timeout (`request_timeout`) closes nothing when it expires, so
//!   the exit waits for the longer of the two drains;
//! * retry-after mode: `E3w + max(request_timeout, watch_grace) + 2 s`: the listener closes
//!   after the drain, with the 2 s HTTP shutdown timeout of retry-after mode
//!   ([`MODE_B_HTTP_SHUTDOWN_TIMEOUT`]).
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

use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::config::{ShutdownMode, MODE_B_HTTP_SHUTDOWN_TIMEOUT};
use crate::duration::GoDuration;

// The planner in three files: `input`, what it takes and its errors; `timeline`, the
// worst-case sequence laid out; this one, the arithmetic of the plan and its problems.
// `observed` learns from the servers' termination summaries instead.
mod input;
pub mod observed;
mod timeline;

use self::input::add;
pub use self::input::{
    PlanError, PlanInput, ProbeSettings, DEFAULT_PROBE_INTERVAL, DEFAULT_PROBE_TIMEOUT,
    DEFAULT_UNHEALTHY_THRESHOLD,
};
use self::timeline::timeline;
pub use self::timeline::{
    EventKind, TimelineEvent, LISTED_PROBES_HEAD, LISTED_PROBES_TAIL, MAX_LISTED_PROBES,
};

/// Kubernetes' default `terminationGracePeriodSeconds`: 30 s.
pub const DEFAULT_TERMINATION_GRACE_PERIOD: Duration = Duration::from_secs(30);

/// Added to the worst-case total (rounded up to whole seconds) for
/// [`Plan::suggested_termination_grace_period`]: 5 s.
pub const GRACE_PERIOD_MARGIN: Duration = Duration::from_secs(5);

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
