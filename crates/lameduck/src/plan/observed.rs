//! Learning from observed terminations: what the servers' termination summaries say about the
//! load balancer, and the shutdown delay that covers it.
//!
//! Every driver logs a [`SummaryRecord`] at the exit. Its arrival fields
//! ([`ArrivalCounts`]) tell when the latest new connection came after the stop signal
//! (`last_new_connection`) and how many came *late*: in the last
//! [`Config::late_arrival_percent`](crate::Config::late_arrival_percent) (20 % by default) of the
//! shutdown delay, or after it. `lame_duck` is the shutdown delay as it happened (from
//! `ShutdownInitiated` to `NotAcceptingNewRequest`; pre-shutdown hooks may lengthen it).
//!
//! [`ObservedTermination::parse_line`] reads one log line, [`Observed`] adds terminations up
//! (and merges the figures of several files), [`recommend`] turns the figures into a shutdown
//! delay, and [`combine`] sets it next to the model's [`Plan`]:
//!
//! * **No late connection.** The delay held. The smallest delay under which the latest
//!   observed connection would still not have been late is `last_new_connection / 0.8`, rounded
//!   up to the next 100 ms ([`min_delay_not_late`]). The recommendation never goes below the
//!   delay in use (the configured one, else the shortest observed): a smaller value is offered
//!   as an optional [`ObservedRecommendation::reduction`] only, since a few terminations need
//!   not have met the balancer's worst case.
//! * **Late connections.** The balancer was still opening connections when the shutdown delay
//!   ran out, so its detection time is only known to be longer than what was observed. The
//!   recommendation is at least twice the longest delay that had late connections, rounded up
//!   to 500 ms ([`LATE_FACTOR`], [`LATE_STEP`]). When the server also saw the balancer's
//!   readiness probes (`readyz_probe_interval`, `failed_readyz_probes`), the balancer's
//!   detection is estimated from them: a failure threshold of at least
//!   [`ASSUMED_FAILURE_THRESHOLD`], and one more than the failed probes it ignored, times the
//!   probe period, plus [`PROBE_SLACK`]. The recommendation keeps that detection out of the
//!   late part of the delay too. This assumes the prober is the balancer that routes: with
//!   Kubernetes endpoint removal and a kubelet probing every 10 s, it overestimates.
//! * **With the model** ([`combine`]): the larger of the observed recommendation and the
//!   model's minimum safe shutdown delay.
//!
//! Late *requests* on connections opened before the signal are counted but never fail a
//! check: an HTTP/2 or kept-alive client keeps its connection until the server ends it, which
//! is not the balancer's decision.
//!
//! ```
//! use core::time::Duration;
//! use lameduck::plan::observed::{recommend, Observed, ObservedTermination, ObservedVerdict};
//!
//! let line = "2026-11-27T05:07:33.916Z INFO lameduck_hyper::server: [graceful-termination] \
//!     termination summary: cause=signal signal_to_exit=3.503s lame_duck=2.000s \
//!     normal_drain=1.002s long_running_drain=- requests_drained=3 requests_remaining=0 \
//!     streams_ended=0 streams_remaining=0 rejected=0 rejected_not_accepting=0 \
//!     rejected_retry_after=0 rejected_request_timeout=0 rejected_routes_not_ready=0 \
//!     last_new_connection=0.700s last_new_request=1.100s late_connections=0 late_requests=2 \
//!     requests_before_ready=0 code=0";
//! let termination = ObservedTermination::parse_line(line)?.expect("a summary line");
//! let mut observed = Observed::default();
//! observed.add(&termination);
//! assert_eq!(observed.min_margin, Some(Duration::from_millis(1300)));
//! let r = recommend(&observed, None, 20);
//! assert_eq!(r.verdict, ObservedVerdict::Holds);
//! assert_eq!(r.recommended, Some(Duration::from_secs(2)));
//! // 0.7 s / 0.8 = 0.875 s, rounded up to 100 ms.
//! assert_eq!(r.reduction, Some(Duration::from_millis(900)));
//! # Ok::<(), lameduck::plan::observed::MalformedSummary>(())
//! ```

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use super::Plan;
use crate::shared::counters::ArrivalCounts;
use crate::summary::{SummaryRecord, SUMMARY_MARKER};

/// What marks a termination summary in a log line: the lifecycle's log tag and
/// [`SUMMARY_MARKER`].
pub const SUMMARY_LINE_MARKER: &str = "[graceful-termination] termination summary:";

/// The recommendation's step when no connection was late: 100 ms.
pub const NOT_LATE_STEP: Duration = Duration::from_millis(100);

/// The recommendation's step when connections were late: 500 ms.
pub const LATE_STEP: Duration = Duration::from_millis(500);

/// With late connections, the recommendation is at least this many times the observed delay.
pub const LATE_FACTOR: u32 = 2;

/// The arrival and WebSocket fields, which lines written before they existed lack.
const OPTIONAL_KEYS: [&str; 11] = [
    "last_new_connection",
    "last_new_request",
    "late_connections",
    "late_requests",
    "requests_before_ready",
    "readyz_probe_interval",
    "failed_readyz_probes",
    "websocket_closes",
    "websocket_unanswered",
    "connections_cut",
    "last_connection_closed",
];

/// The failed probes a balancer is assumed to need before it stops sending, when the logs
/// show it ignoring fewer: HAProxy's `fall` and Kubernetes' `failureThreshold` default to 3.
pub const ASSUMED_FAILURE_THRESHOLD: u64 = 3;

/// What a probe-driven detection adds to the probes' period: one probe's answer and the
/// balancer's scheduling, 500 ms.
pub const PROBE_SLACK: Duration = Duration::from_millis(500);

/// The longest value an error message quotes, in characters.
const QUOTED_VALUE_CHARS: usize = 40;

/// Why a line with a [`SUMMARY_LINE_MARKER`] is not a termination summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MalformedSummary {
    /// A field is missing (the line may be cut short).
    MissingField(String),
    /// A field's value is not valid (quoted up to 40 characters).
    InvalidValue {
        /// The field.
        field: String,
        /// Its value.
        value: String,
    },
    /// `rejected` is not the sum of the `rejected_*` fields.
    RejectedTotal,
}

impl fmt::Display for MalformedSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MalformedSummary::MissingField(field) => {
                write!(f, "field {field}= is missing (is the line cut short?)")
            }
            MalformedSummary::InvalidValue { field, value } => {
                write!(f, "{field}={value:?} is not a valid value")
            }
            MalformedSummary::RejectedTotal => {
                f.write_str("rejected= is not the sum of the rejected_* fields")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for MalformedSummary {}

/// One termination, as its summary line tells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObservedTermination {
    /// The shutdown delay as it happened, from `ShutdownInitiated` to `NotAcceptingNewRequest`
    /// (`None`: the server exited before it stopped accepting).
    pub lame_duck: Option<Duration>,
    /// What the server saw of new connections and requests; `None` when the line has no
    /// arrival fields (a server version from before they were recorded).
    pub arrivals: Option<ArrivalCounts>,
}

impl ObservedTermination {
    /// From a parsed summary; `arrivals_recorded` says whether the line had the arrival fields.
    #[must_use]
    pub fn from_record(record: &SummaryRecord, arrivals_recorded: bool) -> Self {
        ObservedTermination {
            lame_duck: record.lame_duck,
            arrivals: arrivals_recorded.then_some(record.arrivals),
        }
    }

    /// Reads a log line: `Ok(None)` when it holds no [`SUMMARY_LINE_MARKER`] (another log
    /// line), `Ok(Some(_))` for a termination summary. Anything before the marker (timestamp,
    /// level, target) is ignored. Strip terminal colour codes first.
    ///
    /// # Errors
    ///
    /// [`MalformedSummary`] when the line has the marker but is not a valid summary, naming
    /// the first missing or invalid field.
    pub fn parse_line(line: &str) -> Result<Option<Self>, MalformedSummary> {
        let Some(at) = line.find(SUMMARY_LINE_MARKER) else {
            return Ok(None);
        };
        let summary = &line[at..];
        let fields = &summary[SUMMARY_LINE_MARKER.len()..];
        match SummaryRecord::parse_line(summary) {
            Some(record) => {
                let recorded = words(fields).any(|(key, _)| key == "late_connections");
                Ok(Some(ObservedTermination::from_record(&record, recorded)))
            }
            None => Err(diagnose(fields)),
        }
    }
}

/// The `key=value` words of a summary's fields.
fn words(fields: &str) -> impl Iterator<Item = (&str, &str)> {
    fields
        .split_whitespace()
        .filter_map(|word| word.split_once('='))
}

/// Why `fields` (after the marker) do not parse: the first field of the format missing from
/// them, else the first value that does not parse in an otherwise valid line, else the total.
fn diagnose(fields: &str) -> MalformedSummary {
    let template = SummaryRecord::default().to_string();
    let keys: Vec<&str> = words(&template)
        .map(|(key, _)| key)
        .filter(|key| !OPTIONAL_KEYS.contains(key))
        .collect();
    if let Some(missing) = keys
        .iter()
        .find(|key| !words(fields).any(|(k, _)| k == **key))
    {
        return MalformedSummary::MissingField((*missing).to_string());
    }
    for (key, value) in words(fields) {
        if !words(&template).any(|(k, _)| k == key) {
            continue;
        }
        // The rejection fields only parse with a total that matches them.
        let partner = if key == "rejected" {
            Some("rejected_not_accepting")
        } else if key.starts_with("rejected_") {
            Some("rejected")
        } else {
            None
        };
        let probe = with_values(&template, key, partner, value);
        let line = alloc::format!("{SUMMARY_MARKER} {probe}");
        if SummaryRecord::parse_line(&line).is_none() {
            return MalformedSummary::InvalidValue {
                field: key.to_string(),
                value: value.chars().take(QUOTED_VALUE_CHARS).collect(),
            };
        }
    }
    MalformedSummary::RejectedTotal
}

/// `template` with `key` (and `partner`, if any) set to `value`.
fn with_values(template: &str, key: &str, partner: Option<&str>, value: &str) -> String {
    let mut out = String::with_capacity(template.len() + value.len() * 2);
    for word in template.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        match word.split_once('=') {
            Some((k, _)) if k == key || Some(k) == partner => {
                out.push_str(k);
                out.push('=');
                out.push_str(value);
            }
            _ => out.push_str(word),
        }
    }
    out
}

/// The figures of any number of terminations; see the [module docs](self). [`Observed::add`]
/// adds one termination, [`Observed::merge`] the figures of another set (another file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Terminations read.
    pub terminations: u64,
    /// Terminations whose lines have no arrival fields (written by a server version from
    /// before they were recorded): they count as without late connections.
    pub without_arrivals: u64,
    /// Terminations that never reached `NotAcceptingNewRequest` (`lame_duck=-`).
    pub without_shutdown_delay: u64,
    /// The shortest observed shutdown delay (`lame_duck`).
    pub shutdown_delay_min: Option<Duration>,
    /// The longest observed shutdown delay.
    pub shutdown_delay_max: Option<Duration>,
    /// The latest new connection after the signal, over all terminations.
    pub last_new_connection: Option<Duration>,
    /// The latest new request after the signal, over all terminations.
    pub last_new_request: Option<Duration>,
    /// The smallest margin left in the shutdown delay, `lame_duck - last_new_connection`, over
    /// the terminations with both.
    pub min_margin: Option<Duration>,
    /// Terminations with late connections.
    pub with_late_connections: u64,
    /// Late connections, in all.
    pub late_connections: u64,
    /// Late requests, in all (reported only).
    pub late_requests: u64,
    /// Requests before `/readyz` first answered ready, in all.
    pub requests_before_ready: u64,
    /// The longest shutdown delay of a termination with late connections (its latest new
    /// connection when it has no `lame_duck`): the balancer's detection took longer than
    /// most of it.
    pub late_shutdown_delay: Option<Duration>,
    /// The longest `/readyz` probe period before the signal of a termination with late
    /// connections (`readyz_probe_interval`): how often the balancer asked, as the server
    /// saw it.
    pub late_probe_interval: Option<Duration>,
    /// The most `/readyz` answers "not ready" of a termination with late connections
    /// (`failed_readyz_probes`): the balancer kept sending after that many failed probes.
    pub late_failed_probes: u64,
}

fn max_opt(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn min_opt(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Observed {
    /// The figures of `terminations`.
    pub fn from_terminations<'a>(
        terminations: impl IntoIterator<Item = &'a ObservedTermination>,
    ) -> Self {
        let mut observed = Observed::default();
        for t in terminations {
            observed.add(t);
        }
        observed
    }

    /// Adds one termination.
    pub fn add(&mut self, t: &ObservedTermination) {
        self.terminations = self.terminations.saturating_add(1);
        match t.lame_duck {
            Some(_) => {
                self.shutdown_delay_min = min_opt(self.shutdown_delay_min, t.lame_duck);
                self.shutdown_delay_max = max_opt(self.shutdown_delay_max, t.lame_duck);
            }
            None => self.without_shutdown_delay = self.without_shutdown_delay.saturating_add(1),
        }
        let Some(a) = t.arrivals else {
            self.without_arrivals = self.without_arrivals.saturating_add(1);
            return;
        };
        self.last_new_connection = max_opt(self.last_new_connection, a.last_new_connection);
        self.last_new_request = max_opt(self.last_new_request, a.last_new_request);
        if let (Some(delay), Some(last)) = (t.lame_duck, a.last_new_connection) {
            self.min_margin = min_opt(self.min_margin, Some(delay.saturating_sub(last)));
        }
        if a.has_late_connections() {
            self.with_late_connections = self.with_late_connections.saturating_add(1);
            self.late_connections = self.late_connections.saturating_add(a.late_connections);
            self.late_shutdown_delay = max_opt(
                self.late_shutdown_delay,
                t.lame_duck.or(a.last_new_connection),
            );
            self.late_probe_interval = max_opt(self.late_probe_interval, a.readyz_probe_interval);
            self.late_failed_probes = self.late_failed_probes.max(a.failed_readyz_probes);
        }
        self.late_requests = self.late_requests.saturating_add(a.late_requests);
        self.requests_before_ready = self
            .requests_before_ready
            .saturating_add(a.requests_before_ready);
    }

    /// Adds the figures of another set of terminations.
    pub fn merge(&mut self, other: &Observed) {
        self.terminations = self.terminations.saturating_add(other.terminations);
        self.without_arrivals = self.without_arrivals.saturating_add(other.without_arrivals);
        self.without_shutdown_delay = self
            .without_shutdown_delay
            .saturating_add(other.without_shutdown_delay);
        self.shutdown_delay_min = min_opt(self.shutdown_delay_min, other.shutdown_delay_min);
        self.shutdown_delay_max = max_opt(self.shutdown_delay_max, other.shutdown_delay_max);
        self.last_new_connection = max_opt(self.last_new_connection, other.last_new_connection);
        self.last_new_request = max_opt(self.last_new_request, other.last_new_request);
        self.min_margin = min_opt(self.min_margin, other.min_margin);
        self.with_late_connections = self
            .with_late_connections
            .saturating_add(other.with_late_connections);
        self.late_connections = self.late_connections.saturating_add(other.late_connections);
        self.late_requests = self.late_requests.saturating_add(other.late_requests);
        self.requests_before_ready = self
            .requests_before_ready
            .saturating_add(other.requests_before_ready);
        self.late_shutdown_delay = max_opt(self.late_shutdown_delay, other.late_shutdown_delay);
        self.late_probe_interval = max_opt(self.late_probe_interval, other.late_probe_interval);
        self.late_failed_probes = self.late_failed_probes.max(other.late_failed_probes);
    }

    /// Whether any termination had late connections: the balancer stopped sending new
    /// traffic too late.
    #[must_use]
    pub fn has_late_connections(&self) -> bool {
        self.with_late_connections > 0
    }
}

/// What [`recommend`] concludes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObservedVerdict {
    /// No termination had late connections, and the delay in use covers the latest observed
    /// connection.
    Holds,
    /// No termination had late connections, but the configured delay is shorter than
    /// [`ObservedRecommendation::min_delay_for_observed`]: the latest observed connection
    /// would be late under it.
    ConfiguredTooShort,
    /// Some termination had late connections.
    LateConnections,
}

impl ObservedVerdict {
    /// Whether the check passes (exit status 0).
    #[must_use]
    pub const fn is_ok(self) -> bool {
        matches!(self, ObservedVerdict::Holds)
    }
}

/// The result of [`recommend`]; see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObservedRecommendation {
    /// The verdict.
    pub verdict: ObservedVerdict,
    /// The late part of the shutdown delay, in percent, that the recommendation keeps clear.
    pub late_arrival_percent: u8,
    /// The delay in use: the configured one, else the shortest observed (`None`: neither).
    pub shutdown_delay: Option<Duration>,
    /// Whether [`ObservedRecommendation::shutdown_delay`] is the configured one.
    pub configured: bool,
    /// The smallest delay, a multiple of 100 ms, under which the latest observed connection
    /// would not be late ([`min_delay_not_late`]); `None` without a connection after the
    /// signal.
    pub min_delay_for_observed: Option<Duration>,
    /// With late connections: [`LATE_FACTOR`] × [`Observed::late_shutdown_delay`], rounded up
    /// to [`LATE_STEP`].
    pub late_minimum: Option<Duration>,
    /// With late connections and a known probe period ([`Observed::late_probe_interval`]):
    /// the failure threshold assumed of the balancer, the larger of
    /// [`ASSUMED_FAILURE_THRESHOLD`] and one more than the failed probes it ignored.
    pub failure_threshold: Option<u64>,
    /// With late connections and a known probe period: the delay that keeps the balancer's
    /// probe-driven detection, `failure_threshold × probe period +` [`PROBE_SLACK`], out of
    /// the late part, rounded up to [`LATE_STEP`].
    pub probe_minimum: Option<Duration>,
    /// The recommended shutdown delay: the largest of the delay in use,
    /// `min_delay_for_observed`, `late_minimum` and `probe_minimum` (`None`: none is known).
    pub recommended: Option<Duration>,
    /// Without late connections: `min_delay_for_observed` when it is below the delay in use, a
    /// reduction the observations allow (not one they prove safe).
    pub reduction: Option<Duration>,
}

/// `d` rounded up to a multiple of `step` (saturating at [`Duration::MAX`]; a zero `step`
/// leaves `d` as it is).
#[must_use]
pub fn ceil_to(d: Duration, step: Duration) -> Duration {
    let step = step.as_nanos();
    if step == 0 {
        return d;
    }
    let steps = d.as_nanos().div_ceil(step);
    from_nanos(steps.saturating_mul(step))
}

/// A duration of `nanos` nanoseconds, saturating at [`Duration::MAX`].
fn from_nanos(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    match u64::try_from(nanos / NANOS_PER_SEC) {
        // The remainder is below 1e9 and fits.
        Ok(secs) => Duration::new(secs, (nanos % NANOS_PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

/// The smallest shutdown delay, a multiple of 100 ms, under which a connection `last` after
/// the signal is not late with `late_arrival_percent` (clamped to 99): the late part begins at
/// `delay × (100 − percent) / 100`, as [`Config::late_arrivals_from`](crate::Config) computes
/// it, and must begin after `last`. With the default 20 %, `last / 0.8` rounded up.
#[must_use]
pub fn min_delay_not_late(last: Duration, late_arrival_percent: u8) -> Duration {
    let early = 100 - u128::from(late_arrival_percent.min(99));
    // floor(d × early / 100) > last  ⇔  d × early >= 100 × (last + 1 ns).
    let nanos = last.as_nanos().saturating_add(1).saturating_mul(100);
    ceil_to(from_nanos(nanos.div_ceil(early)), NOT_LATE_STEP)
}

/// The shutdown delay that covers what `observed` shows; see the [module docs](self).
/// `configured` is the delay in use when known (a flag, a manifest): it is checked against the
/// observations; else the shortest observed delay stands for it. `late_arrival_percent` is the
/// servers' [`Config::late_arrival_percent`](crate::Config::late_arrival_percent) (20 by
/// default).
#[must_use]
pub fn recommend(
    observed: &Observed,
    configured: Option<Duration>,
    late_arrival_percent: u8,
) -> ObservedRecommendation {
    let shutdown_delay = configured.or(observed.shutdown_delay_min);
    let need = observed
        .last_new_connection
        .map(|last| min_delay_not_late(last, late_arrival_percent));
    let late = observed.has_late_connections();
    let late_minimum = if late {
        observed.late_shutdown_delay.map(|d| {
            let doubled = d.checked_mul(LATE_FACTOR).unwrap_or(Duration::MAX);
            ceil_to(doubled, LATE_STEP)
        })
    } else {
        None
    };
    let failure_threshold = (late && observed.late_probe_interval.is_some())
        .then(|| ASSUMED_FAILURE_THRESHOLD.max(observed.late_failed_probes.saturating_add(1)));
    let probe_minimum = match (failure_threshold, observed.late_probe_interval) {
        (Some(threshold), Some(period)) => {
            let times = u32::try_from(threshold).unwrap_or(u32::MAX);
            let detection = period
                .checked_mul(times)
                .and_then(|d| d.checked_add(PROBE_SLACK))
                .unwrap_or(Duration::MAX);
            Some(ceil_to(
                min_delay_not_late(detection, late_arrival_percent),
                LATE_STEP,
            ))
        }
        _ => None,
    };
    let recommended = max_opt(
        max_opt(max_opt(shutdown_delay, need), late_minimum),
        probe_minimum,
    );
    let verdict = if late {
        ObservedVerdict::LateConnections
    } else if configured.is_some() && matches!((need, configured), (Some(n), Some(c)) if c < n) {
        ObservedVerdict::ConfiguredTooShort
    } else {
        ObservedVerdict::Holds
    };
    let reduction = match (late, need, shutdown_delay) {
        (false, Some(n), Some(d)) if n < d => Some(n),
        _ => None,
    };
    ObservedRecommendation {
        verdict,
        late_arrival_percent,
        shutdown_delay,
        configured: configured.is_some(),
        min_delay_for_observed: need,
        late_minimum,
        failure_threshold,
        probe_minimum,
        recommended,
        reduction,
    }
}

/// The observed recommendation next to the model's; see [`combine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CombinedRecommendation {
    /// [`ObservedRecommendation::recommended`].
    pub observed: Option<Duration>,
    /// The model's [`Plan::min_safe_shutdown_delay`] (its worst-case detection).
    pub model: Duration,
    /// The larger of the two: the shutdown delay to set.
    pub recommended: Duration,
    /// Without late connections: the larger of the observed reduction and the model's minimum,
    /// when it is below the delay in use.
    pub reduction: Option<Duration>,
    /// Both agree the delay in use is enough: the observations hold and the plan is safe.
    pub safe: bool,
}

/// The larger of the observed and the model's recommendations.
#[must_use]
pub fn combine(observed: &ObservedRecommendation, plan: &Plan) -> CombinedRecommendation {
    let model = plan.min_safe_shutdown_delay;
    let recommended = observed.recommended.map_or(model, |o| o.max(model));
    let reduction = match (observed.reduction, observed.shutdown_delay) {
        (Some(r), Some(d)) if r.max(model) < d => Some(r.max(model)),
        _ => None,
    };
    CombinedRecommendation {
        observed: observed.recommended,
        model,
        recommended,
        reduction,
        safe: observed.verdict.is_ok() && plan.is_safe(),
    }
}

#[cfg(test)]
mod tests;
