//! `--json`: every figure, alone; next to the model, the plan's keys and `observed`.

use std::collections::BTreeSet;

use lameduck_cli::report::{ObservedOnlyReport, PlanReport};

use crate::common::{json, lameduck, stdout};
use crate::{code, fixture, observed, secs, AWS_PROBES};

/// The keys of a JSON object.
fn keys(text: &str) -> BTreeSet<String> {
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    v.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn json_has_every_figure_and_keeps_the_plan_keys() {
    // Alone.
    let o = observed(&[&fixture("tokio-clean.log")], &["--json"]);
    assert_eq!(code(&o), Some(0));
    let report = json::<ObservedOnlyReport>(&o);
    assert!(report.safe);
    assert!(report.verdict.starts_with("HOLDS"), "{}", report.verdict);
    let r = report.observed;
    assert_eq!(r.outcome, "holds");
    assert_eq!(r.terminations, 2);
    assert_eq!(r.files.len(), 1);
    assert_eq!(r.shutdown_delay_min_seconds, Some(secs(5.0)));
    assert_eq!(r.last_new_connection_seconds, Some(secs(1.9)));
    assert_eq!(r.last_new_request_seconds, Some(secs(4.31)));
    assert_eq!(r.margin_seconds, Some(secs(3.1)));
    assert!(!r.has_late_connections);
    assert_eq!((r.late_connections, r.late_requests), (0, 3));
    assert_eq!(r.requests_before_ready, 0);
    assert_eq!(r.late_arrival_percent, 20);
    assert_eq!(r.min_delay_for_observed_seconds, Some(secs(2.4)));
    assert_eq!(r.recommended_shutdown_delay_seconds, Some(secs(5.0)));
    assert_eq!(r.reduction_seconds, Some(secs(2.4)));
    assert_eq!(r.model_recommendation_seconds, None);
    assert!(!r.shutdown_delay_configured);
    let text = stdout(&o);
    assert!(
        text.contains("\"last_new_connection_seconds\": 1.9"),
        "{text}"
    );

    // With the model: the plan's keys, and `observed`.
    let mut extra = AWS_PROBES.to_vec();
    extra.push("--json");
    let plain = lameduck(&[&["plan"][..], &extra].concat());
    let with = observed(&[&fixture("smol-late.log")], &extra);
    assert_eq!(code(&with), Some(1));
    let mut expected = keys(&stdout(&plain));
    expected.insert(String::from("observed"));
    assert_eq!(keys(&stdout(&with)), expected);
    let report = json::<PlanReport>(&with);
    assert!(
        !report.safe,
        "the exit status is 0 exactly when safe is true"
    );
    let r = report.observed.unwrap();
    assert_eq!(r.outcome, "late_connections");
    assert_eq!(r.late_minimum_seconds, Some(secs(4.0)));
    assert_eq!(r.observed_recommendation_seconds, Some(secs(4.0)));
    assert_eq!(r.model_recommendation_seconds, Some(secs(30.0)));
    assert_eq!(r.recommended_shutdown_delay_seconds, Some(secs(30.0)));
    assert_eq!(
        (r.terminations_with_late_connections, r.late_connections),
        (1, 3)
    );
    // The plain plan's JSON has no `observed`.
    assert!(!stdout(&plain).contains("\"observed\""));
}
