//! The logs next to the probe model: the larger recommendation wins, and with a Deployment
//! the manifest's changes carry the combined delay.

use lameduck_cli::report::PlanReport;

use crate::common::{self, json, stderr, stdout};
use crate::{code, fixture, observed, temp, AWS_PROBES, SMALL_PROBES};

#[test]
fn with_probe_flags_the_larger_recommendation_wins() {
    // The model's 30s beats the logs' 4s.
    let o = observed(&[&fixture("smol-late.log")], &AWS_PROBES);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(1), "{out}{}", stderr(&o));
    assert!(out.contains("worst-case timeline"), "{out}");
    assert!(
        out.contains("from the logs  4s at least, 2 × the observed delay 2s"),
        "{out}"
    );
    assert!(
        out.contains("model          30s worst-case detection"),
        "{out}"
    );
    assert!(
        out.contains("recommended    --shutdown-delay 30s: the larger of the two (now 2s)"),
        "{out}"
    );
    assert!(out.contains("the model's worst case is 30s"), "{out}");
    // Without --shutdown-delay, the model plans with the observed delay, not 0s.
    assert!(
        out.contains("planned with the shortest observed shutdown delay, 2s"),
        "{out}"
    );
    assert!(out.contains("shutdown       delay 2s"), "{out}");

    // The logs' 4s beat the model's 1.5s; the model alone says safe, the logs do not.
    let mut extra = SMALL_PROBES.to_vec();
    extra.extend(["--shutdown-delay", "2s"]);
    let o = observed(&[&fixture("smol-late.log")], &extra);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(1), "{out}{}", stderr(&o));
    assert!(out.contains("verdict        SAFE"), "{out}");
    assert!(
        out.contains("recommended    --shutdown-delay 4s: the larger of the two (now 2s)"),
        "{out}"
    );
    assert!(
        out.contains("overall        UNSAFE: the termination logs show late connections"),
        "{out}"
    );
    // A connection after the model's worst case: the model's settings are wrong.
    assert!(out.contains("the logs contradict the model"), "{out}");

    // Clean logs and a safe model: keep the delay; the reduction is bounded by the model.
    let mut extra = vec![
        "--probe-interval",
        "5s",
        "--probe-timeout",
        "2s",
        "--unhealthy-threshold",
        "2",
    ];
    extra.extend(["--shutdown-delay", "30s"]);
    let o = observed(&[&fixture("tokio-clean.log")], &extra);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(0), "{out}{}", stderr(&o));
    assert!(
        out.contains("recommended    --shutdown-delay 30s: keep it; it covers both"),
        "{out}"
    );
    assert!(
        out.contains("reduction      optional: --shutdown-delay 12s"),
        "{out}"
    );
    assert!(out.contains("overall        SAFE"), "{out}");

    // Clean logs, unsafe model: the model's delay, exit 1.
    let o = observed(&[&fixture("tokio-clean.log")], &AWS_PROBES);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(1), "{out}{}", stderr(&o));
    assert!(
        out.contains("recommended    --shutdown-delay 30s: the larger of the two (now 5s)"),
        "{out}"
    );
    assert!(
        out.contains("overall        UNSAFE: the model's plan is unsafe"),
        "{out}"
    );
}

/// aws.yaml with a 2s delay, a probe that detects in 2s, and a 62s grace period (exactly the
/// worst case with 2s).
fn two_second_manifest() -> String {
    let aws = std::fs::read_to_string(common::fixture("aws.yaml")).unwrap();
    let text = aws
        .replace("=30s", "=2s")
        .replace("periodSeconds: 10", "periodSeconds: 1")
        .replace("timeoutSeconds: 10", "timeoutSeconds: 1")
        .replace("failureThreshold: 2", "failureThreshold: 1")
        .replace(
            "terminationGracePeriodSeconds: 120",
            "terminationGracePeriodSeconds: 62",
        );
    temp("deploy-2s.yaml", text.as_bytes())
}

#[test]
fn with_a_deployment_the_manifest_changes_carry_the_combined_delay() {
    let manifest = two_second_manifest();
    let o = observed(&[&fixture("smol-late.log")], &["--deployment", &manifest]);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(1), "{out}{}", stderr(&o));
    assert!(out.contains("verdict        SAFE"), "{out}");
    assert!(out.contains("to change in the manifest:"), "{out}");
    assert!(
        out.contains(
            "  - set --shutdown-delay=4s (now 2s) in container \"checkout\"'s args: the larger of \
             what the termination logs show (4s) and the model's worst-case detection (2s)"
        ),
        "{out}"
    );
    // Planned again with 4s: 4s + 1m = 64s no longer fits in 62.
    assert!(
        out.contains("  - set terminationGracePeriodSeconds: 69 (now 62): the worst case 1m4s"),
        "{out}"
    );
    let report = json::<PlanReport>(&observed(
        &[&fixture("smol-late.log")],
        &["--deployment", &manifest, "--json"],
    ));
    assert!(!report.safe);
    let changes = report.deployment.unwrap().changes;
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(changes[0].starts_with("set --shutdown-delay=4s (now 2s)"));
    // The Deployment to apply has the combined delay and a grace period that fits it.
    let o = observed(
        &[&fixture("smol-late.log")],
        &["--deployment", &manifest, "--kubernetes"],
    );
    let yaml = stdout(&o);
    assert!(yaml.contains("- --shutdown-delay=4s"), "{yaml}");
    assert!(yaml.contains("terminationGracePeriodSeconds: 69"), "{yaml}");
    // Clean logs and a safe manifest: nothing to change.
    let aws = common::fixture("aws.yaml");
    let o = observed(
        &[&fixture("tokio-clean.log")],
        &["--deployment", aws.to_str().unwrap()],
    );
    let out = stdout(&o);
    assert_eq!(code(&o), Some(0), "{out}{}", stderr(&o));
    assert!(
        out.contains("recommended    --shutdown-delay 30s: keep it; it covers both"),
        "{out}"
    );
    assert!(out.contains("manifest       nothing to change"), "{out}");
}
