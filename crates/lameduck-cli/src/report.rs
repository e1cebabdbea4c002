//! `--json`: the plan as typed, documented objects serialized with `serde_json`; durations are
//! exact decimal seconds (`30`, `1.5`, `0.000000001`). The schema is in `docs/planner.md`;
//! the same types deserialize the output again.

use std::fmt;
use std::time::Duration;

use lameduck::config::ShutdownMode;
use lameduck::plan::observed::{CombinedRecommendation, ObservedRecommendation, ObservedVerdict};
use lameduck::plan::{EventKind, Plan, PlanInput};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::inputs::ManifestContext;
use crate::logs::Logs;

/// A duration as a JSON number of exact decimal seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seconds(pub Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.subsec_nanos();
        if nanos == 0 {
            return write!(f, "{}", self.0.as_secs());
        }
        let fraction = format!("{nanos:09}");
        write!(f, "{}.{}", self.0.as_secs(), fraction.trim_end_matches('0'))
    }
}

impl Serialize for Seconds {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw = RawValue::from_string(self.to_string()).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        parse_seconds(raw.get())
            .map(Seconds)
            .ok_or_else(|| serde::de::Error::custom(format!("not decimal seconds: {}", raw.get())))
    }
}

/// `30`, `1.5`, `0.000000001` back into a duration; `None` for anything else.
fn parse_seconds(text: &str) -> Option<Duration> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 9 {
        return None;
    }
    let nanos = format!("{fraction:0<9}").parse::<u32>().ok()?;
    Some(Duration::new(whole.parse().ok()?, nanos))
}

/// The shutdown mode as the JSON document names it: `A` is close-listener mode (the listener
/// closes), `B` retry-after mode (new requests get 429).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Close-listener mode: the listener closes at NotAcceptingNewRequest.
    A,
    /// Retry-after mode: new requests get 429 until the drain ends.
    B,
}

/// The whole `--json` document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    /// The exit status is 0 exactly when this is true.
    pub safe: bool,
    /// The one-line verdict of the text output.
    pub verdict: String,
    /// The shutdown mode.
    pub mode: Mode,
    /// Worst-case time from /readyz turning red to the load balancer's decision.
    pub detection_worst_case_seconds: Seconds,
    /// The shutdown delay planned with.
    pub shutdown_delay_seconds: Seconds,
    /// The smallest safe shutdown delay.
    pub min_safe_shutdown_delay_seconds: Seconds,
    /// When the server stops accepting, at the latest (after the delay and the hooks).
    pub stop_accepting_worst_case_seconds: Seconds,
    /// The end of the normal drain; `null` without a request timeout.
    pub normal_drain_worst_case_seconds: Option<Seconds>,
    /// The worst-case termination; `null` without a request timeout.
    pub total_worst_case_seconds: Option<Seconds>,
    /// The budget checked against (the server's part of it with `--deployment`), or `null`.
    pub termination_grace_period_seconds: Option<Seconds>,
    /// The worst case rounded up plus 5 s, or `null`.
    pub suggested_termination_grace_period_seconds: Option<Seconds>,
    /// The merged input.
    pub input: InputReport,
    /// Why it is unsafe; empty when safe.
    pub problems: Vec<ProblemReport>,
    /// The worst-case timeline from the stop signal.
    pub timeline: Vec<EventReport>,
    /// With `--kubernetes`: the Deployment as YAML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    /// With `--deployment`: what was read and what to change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentReport>,
    /// With `--observed`: what the termination summaries show, and the recommendation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<ObservedReport>,
}

/// The `--json` document of `--observed` without the model (no load balancer flags, no
/// `--deployment`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObservedOnlyReport {
    /// The exit status is 0 exactly when this is true.
    pub safe: bool,
    /// The one-line verdict of the text output.
    pub verdict: String,
    /// The figures and the recommendation.
    pub observed: ObservedReport,
}

/// With `--observed`: the termination summaries' figures and the recommendation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedReport {
    /// `holds`, `configured_too_short` or `late_connections`.
    pub outcome: String,
    /// The one-line verdict of the text output.
    pub verdict: String,
    /// Each file, in the order given.
    pub files: Vec<ObservedFileReport>,
    /// Terminations read, in all.
    pub terminations: u64,
    /// Terminations whose server version did not record arrivals (counted as without late
    /// connections).
    pub terminations_without_arrivals: u64,
    /// Terminations that never stopped accepting (`lame_duck=-`).
    pub terminations_without_shutdown_delay: u64,
    /// The shortest observed shutdown delay (`lame_duck`), or `null`.
    pub shutdown_delay_min_seconds: Option<Seconds>,
    /// The longest observed shutdown delay, or `null`.
    pub shutdown_delay_max_seconds: Option<Seconds>,
    /// The latest new connection after the signal, over all terminations, or `null`.
    pub last_new_connection_seconds: Option<Seconds>,
    /// The latest new request after the signal, or `null`.
    pub last_new_request_seconds: Option<Seconds>,
    /// The smallest margin left in the shutdown delay (delay − latest new connection), or
    /// `null`.
    pub margin_seconds: Option<Seconds>,
    /// Whether any termination had late connections (the exit status is then 1).
    pub has_late_connections: bool,
    /// Terminations with late connections.
    pub terminations_with_late_connections: u64,
    /// Late connections, in all.
    pub late_connections: u64,
    /// Late requests, in all (reported only).
    pub late_requests: u64,
    /// Requests before `/readyz` first answered ready, in all.
    pub requests_before_ready: u64,
    /// The late part of the shutdown delay, in percent.
    pub late_arrival_percent: u8,
    /// The delay checked: the configured one, else the shortest observed; or `null`.
    pub shutdown_delay_checked_seconds: Option<Seconds>,
    /// Whether `shutdown_delay_checked_seconds` is configured (a flag or the manifest).
    pub shutdown_delay_configured: bool,
    /// The smallest delay under which the latest observed connection is not late, or `null`.
    pub min_delay_for_observed_seconds: Option<Seconds>,
    /// With late connections: 2 × the longest delay that had them, rounded up to 500 ms.
    pub late_minimum_seconds: Option<Seconds>,
    /// With late connections: the `/readyz` probe period the servers saw before the signal
    /// (the longest), or `null`.
    pub readyz_probe_interval_seconds: Option<Seconds>,
    /// With late connections: the most failed `/readyz` probes of a late termination.
    pub failed_readyz_probes: u64,
    /// With late connections and a probe period: the failure threshold assumed of the
    /// balancer (at least 3, and one more than the failed probes it ignored), or `null`.
    pub assumed_failure_threshold: Option<u64>,
    /// With late connections and a probe period: the delay that keeps the probe-driven
    /// detection (threshold × period + 0.5 s) out of the late part, or `null`.
    pub probe_minimum_seconds: Option<Seconds>,
    /// What the logs recommend on their own, or `null`.
    pub observed_recommendation_seconds: Option<Seconds>,
    /// With the model: its minimum safe shutdown delay (worst-case detection), else `null`.
    pub model_recommendation_seconds: Option<Seconds>,
    /// The shutdown delay to set: the larger of the observed and the model's
    /// recommendations; `null` when nothing is known.
    pub recommended_shutdown_delay_seconds: Option<Seconds>,
    /// An optional, smaller delay the observations (and the model) allow, or `null`.
    pub reduction_seconds: Option<Seconds>,
    /// Remarks: old server versions, terminations without a delay, traffic before ready.
    pub notes: Vec<String>,
}

/// One `--observed` file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedFileReport {
    /// The file as given (`(stdin)` for `-`).
    pub file: String,
    /// Its terminations.
    pub terminations: u64,
    /// Of them, without arrival fields.
    pub terminations_without_arrivals: u64,
}

/// The planner's input after merging flags, manifest and defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputReport {
    /// `--probe-interval`.
    pub probe_interval_seconds: Seconds,
    /// `--probe-timeout`.
    pub probe_timeout_seconds: Seconds,
    /// `--unhealthy-threshold`.
    pub unhealthy_threshold: u32,
    /// `--propagation-delay`.
    pub propagation_delay_seconds: Seconds,
    /// `--overlapping-probes`.
    pub overlapping_probes: bool,
    /// `--shutdown-delay`.
    pub shutdown_delay_seconds: Seconds,
    /// `--request-timeout`.
    pub request_timeout_seconds: Seconds,
    /// `--shutdown-watch-termination-grace-period`.
    pub shutdown_watch_termination_grace_period_seconds: Seconds,
    /// `--shutdown-send-retry-after`.
    pub shutdown_send_retry_after: bool,
    /// `--pre-shutdown-hooks`.
    pub pre_shutdown_hooks_seconds: Seconds,
    /// The budget checked against, or `null`.
    pub termination_grace_period_seconds: Option<Seconds>,
}

/// One reason the plan is unsafe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProblemReport {
    /// A stable name, such as `detection_after_stop_accepting`.
    pub kind: String,
    /// The text output's sentence.
    pub message: String,
}

/// One event of the worst-case timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventReport {
    /// When it starts, from the stop signal.
    pub at_seconds: Seconds,
    /// How long it lasts (0 for an instant).
    pub duration_seconds: Seconds,
    /// `at + duration`.
    pub end_seconds: Seconds,
    /// The short tag of the text table (`E1`, `P2`, `LB`).
    pub tag: String,
    /// A stable name, such as `probe_fails`.
    pub kind: String,
    /// For `probe_fails`: the probe's number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<u32>,
    /// For `probes_fail`: the first and last probe's numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<[u32; 2]>,
    /// What happens.
    pub label: String,
}

/// With `--deployment`: the manifest's part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentReport {
    /// The file.
    pub file: String,
    /// The Deployment's name.
    pub name: String,
    /// The container checked.
    pub container: String,
    /// The whole terminationGracePeriodSeconds (the preStop sleep included).
    pub termination_grace_period_seconds: Seconds,
    /// The preStop sleep, or `null`.
    pub pre_stop_sleep_seconds: Option<Seconds>,
    /// Defaults that applied and other remarks.
    pub notes: Vec<String>,
    /// What to change for the plan to be safe; empty when safe.
    pub changes: Vec<String>,
}

/// Builds the report.
pub fn build(
    input: &PlanInput,
    plan: &Plan,
    verdict: &str,
    kubernetes: Option<&str>,
    manifest: Option<(&ManifestContext, Vec<String>)>,
) -> PlanReport {
    let probes = &input.probes;
    let config = &input.config;
    PlanReport {
        safe: plan.is_safe(),
        verdict: verdict.to_string(),
        mode: match plan.mode {
            ShutdownMode::CloseListener => Mode::A,
            ShutdownMode::SendRetryAfter => Mode::B,
        },
        detection_worst_case_seconds: Seconds(plan.detection_worst_case),
        shutdown_delay_seconds: Seconds(plan.shutdown_delay),
        min_safe_shutdown_delay_seconds: Seconds(plan.min_safe_shutdown_delay),
        stop_accepting_worst_case_seconds: Seconds(plan.stop_accepting_worst_case),
        normal_drain_worst_case_seconds: plan.normal_drain_worst_case.map(Seconds),
        total_worst_case_seconds: plan.total_worst_case.map(Seconds),
        termination_grace_period_seconds: plan.termination_grace_period.map(Seconds),
        suggested_termination_grace_period_seconds: plan
            .suggested_termination_grace_period
            .map(Seconds),
        input: InputReport {
            probe_interval_seconds: Seconds(probes.interval),
            probe_timeout_seconds: Seconds(probes.timeout),
            unhealthy_threshold: probes.unhealthy_threshold,
            propagation_delay_seconds: Seconds(probes.propagation_delay),
            overlapping_probes: probes.allow_overlapping_probes,
            shutdown_delay_seconds: Seconds(config.shutdown_delay()),
            request_timeout_seconds: Seconds(config.request_timeout()),
            shutdown_watch_termination_grace_period_seconds: Seconds(
                config.shutdown_watch_termination_grace_period(),
            ),
            shutdown_send_retry_after: config.shutdown_send_retry_after(),
            pre_shutdown_hooks_seconds: Seconds(input.pre_shutdown_hooks),
            termination_grace_period_seconds: input.termination_grace_period.map(Seconds),
        },
        problems: plan
            .problems
            .iter()
            .map(|p| ProblemReport {
                kind: p.name().to_string(),
                message: p.to_string(),
            })
            .collect(),
        timeline: plan
            .timeline
            .iter()
            .map(|e| EventReport {
                at_seconds: Seconds(e.at),
                duration_seconds: Seconds(e.duration),
                end_seconds: Seconds(e.end()),
                tag: e.tag.clone(),
                kind: e.kind.name().to_string(),
                probe: match e.kind {
                    EventKind::ProbeFails { index } => Some(index),
                    _ => None,
                },
                probes: match e.kind {
                    EventKind::ProbesFail { first, last } => Some([first, last]),
                    _ => None,
                },
                label: e.label.clone(),
            })
            .collect(),
        kubernetes: kubernetes.map(str::to_string),
        deployment: manifest.map(|(context, changes)| DeploymentReport {
            file: context.file.clone(),
            name: context.manifest.deployment.clone(),
            container: context.manifest.container.clone(),
            termination_grace_period_seconds: Seconds(context.termination_grace_period),
            pre_stop_sleep_seconds: context.manifest.pre_stop_sleep.map(Seconds),
            notes: context.notes.clone(),
            changes,
        }),
        observed: None,
    }
}

/// The `observed` object: `verdict` and `notes` are the text output's.
pub fn build_observed(
    logs: &Logs,
    recommendation: &ObservedRecommendation,
    combined: Option<&CombinedRecommendation>,
    verdict: &str,
    notes: &[String],
) -> ObservedReport {
    let o = &logs.total;
    let r = recommendation;
    ObservedReport {
        outcome: String::from(match r.verdict {
            ObservedVerdict::Holds => "holds",
            ObservedVerdict::ConfiguredTooShort => "configured_too_short",
            ObservedVerdict::LateConnections => "late_connections",
        }),
        verdict: verdict.to_string(),
        files: logs
            .files
            .iter()
            .map(|f| ObservedFileReport {
                file: f.file.clone(),
                terminations: f.observed.terminations,
                terminations_without_arrivals: f.observed.without_arrivals,
            })
            .collect(),
        terminations: o.terminations,
        terminations_without_arrivals: o.without_arrivals,
        terminations_without_shutdown_delay: o.without_shutdown_delay,
        shutdown_delay_min_seconds: o.shutdown_delay_min.map(Seconds),
        shutdown_delay_max_seconds: o.shutdown_delay_max.map(Seconds),
        last_new_connection_seconds: o.last_new_connection.map(Seconds),
        last_new_request_seconds: o.last_new_request.map(Seconds),
        margin_seconds: o.min_margin.map(Seconds),
        has_late_connections: o.has_late_connections(),
        terminations_with_late_connections: o.with_late_connections,
        late_connections: o.late_connections,
        late_requests: o.late_requests,
        requests_before_ready: o.requests_before_ready,
        late_arrival_percent: r.late_arrival_percent,
        shutdown_delay_checked_seconds: r.shutdown_delay.map(Seconds),
        shutdown_delay_configured: r.configured,
        min_delay_for_observed_seconds: r.min_delay_for_observed.map(Seconds),
        late_minimum_seconds: r.late_minimum.map(Seconds),
        readyz_probe_interval_seconds: o.late_probe_interval.map(Seconds),
        failed_readyz_probes: o.late_failed_probes,
        assumed_failure_threshold: r.failure_threshold,
        probe_minimum_seconds: r.probe_minimum.map(Seconds),
        observed_recommendation_seconds: r.recommended.map(Seconds),
        model_recommendation_seconds: combined.map(|c| Seconds(c.model)),
        recommended_shutdown_delay_seconds: match combined {
            Some(c) => Some(Seconds(c.recommended)),
            None => r.recommended.map(Seconds),
        },
        reduction_seconds: match combined {
            Some(c) => c.reduction.map(Seconds),
            None => r.reduction.map(Seconds),
        },
        notes: notes.to_vec(),
    }
}

/// The report as pretty JSON with a final newline.
///
/// # Errors
///
/// `serde_json`'s error (not expected: every field is serializable).
pub fn render(report: &PlanReport) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(report)?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_seconds_both_ways() {
        for (d, text) in [
            (Duration::from_secs(30), "30"),
            (Duration::from_millis(1500), "1.5"),
            (Duration::from_nanos(1), "0.000000001"),
            (Duration::ZERO, "0"),
        ] {
            assert_eq!(Seconds(d).to_string(), text);
            assert_eq!(serde_json::to_string(&Seconds(d)).unwrap(), text);
            assert_eq!(serde_json::from_str::<Seconds>(text).unwrap(), Seconds(d));
        }
        for bad in ["-1", "1e3", "\"1\"", "1.0000000001", ".5"] {
            assert!(serde_json::from_str::<Seconds>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn strings_are_escaped() {
        let problem = ProblemReport {
            kind: String::from("k"),
            message: String::from("a\"b\\c\n\u{1}×"),
        };
        let text = serde_json::to_string(&problem).unwrap();
        assert!(text.contains(r#""a\"b\\c\n\u0001×""#), "{text}");
        assert_eq!(
            serde_json::from_str::<ProblemReport>(&text).unwrap(),
            problem
        );
    }
}
