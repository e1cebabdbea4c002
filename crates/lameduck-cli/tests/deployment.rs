//! `lameduck plan --deployment FILE`: the user's own manifest, its outputs, its errors, and the
//! `--json` output read back into the documented types.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{fixture, json, lameduck, stderr, stdout, temp_file};

use lameduck_cli::report::{Mode, PlanReport, Seconds};
use std::time::Duration;

/// `lameduck plan --deployment FILE` plus `extra`.
fn plan(file: &Path, extra: &[&str]) -> Output {
    let file = file.to_str().unwrap();
    let mut args = vec!["plan", "--deployment", file];
    args.extend_from_slice(extra);
    lameduck(&args)
}

fn aws_text() -> String {
    std::fs::read_to_string(fixture("aws.yaml")).unwrap()
}

#[test]
fn the_aws_example_is_safe_with_30s() {
    let o = plan(&fixture("aws.yaml"), &[]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(
        out.contains("(Deployment \"checkout\", container \"checkout\")"),
        "{out}"
    );
    assert!(out.contains("worst case t = 2 × 10s + 10s = 30s"), "{out}");
    assert!(
        out.contains("SAFE: worst-case detection 30s <= shutdown delay 30s"),
        "{out}"
    );
    // The file's request timeout (1m) and grace period (120 s): 30 + 60 = 90 fits.
    assert!(
        out.contains("terminationGracePeriodSeconds 2m0s: fits"),
        "{out}"
    );
    assert!(out.contains("manifest       nothing to change"), "{out}");
}

#[test]
fn the_aws_example_is_unsafe_with_20s_and_names_30s() {
    let file = temp_file("aws-20s.yaml", aws_text().replace("=30s", "=20s"));
    let o = plan(&file, &[]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    assert!(
        out.contains("UNSAFE: worst-case detection 30s > shutdown delay 20s"),
        "{out}"
    );
    assert!(
        out.contains("minimum safe shutdown delay: 30s (--shutdown-delay 30s)"),
        "{out}"
    );
    assert!(
        out.contains("set --shutdown-delay=30s (now 20s) in container \"checkout\"'s args"),
        "{out}"
    );
    // The command line overrides the file, both ways.
    let o = plan(&file, &["--shutdown-delay", "30s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = plan(&fixture("aws.yaml"), &["--shutdown-delay=20s"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
}

#[test]
fn command_line_probe_settings_override_the_file() {
    let o = plan(
        &fixture("aws.yaml"),
        &["--unhealthy-threshold", "1", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json::<PlanReport>(&o);
    assert_eq!(r.input.unhealthy_threshold, 1);
    assert_eq!(
        r.input.probe_interval_seconds,
        Seconds(Duration::from_secs(10))
    );
    assert_eq!(
        r.input.probe_timeout_seconds,
        Seconds(Duration::from_secs(10))
    );
    assert_eq!(
        r.detection_worst_case_seconds,
        Seconds(Duration::from_secs(20))
    );
    let d = r.deployment.expect("the deployment section");
    assert_eq!(
        (d.name.as_str(), d.container.as_str()),
        ("checkout", "checkout")
    );
    assert_eq!(
        d.termination_grace_period_seconds,
        Seconds(Duration::from_secs(120))
    );
    assert!(d.changes.is_empty());
}

#[test]
fn a_pre_stop_sleep_uses_part_of_the_grace_period() {
    let o = plan(&fixture("prestop.json"), &["--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let r = json::<PlanReport>(&o);
    assert!(!r.safe);
    assert_eq!(r.mode, Mode::B);
    // period 5 (timeout and threshold: 1 s default, 2): 2 × 5 + 1 = 11 <= 15.
    assert_eq!(
        r.detection_worst_case_seconds,
        Seconds(Duration::from_secs(11))
    );
    // 15 + 20 + 2 = 37 > 30 (Kubernetes' default) - 10 (the preStop sleep).
    assert_eq!(
        r.total_worst_case_seconds,
        Some(Seconds(Duration::from_secs(37)))
    );
    assert_eq!(
        r.termination_grace_period_seconds,
        Some(Seconds(Duration::from_secs(20)))
    );
    let d = r.deployment.unwrap();
    assert_eq!(
        d.pre_stop_sleep_seconds,
        Some(Seconds(Duration::from_secs(10)))
    );
    assert_eq!(
        d.termination_grace_period_seconds,
        Seconds(Duration::from_secs(30))
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("Kubernetes' default 30s")),
        "{:?}",
        d.notes
    );
    assert!(
        d.notes.iter().any(|n| n.contains("preStop sleep (10s)")),
        "{:?}",
        d.notes
    );
    assert_eq!(d.changes.len(), 1, "{:?}", d.changes);
    assert!(
        d.changes[0].starts_with("set terminationGracePeriodSeconds: 52 (now 30)"),
        "{:?}",
        d.changes
    );
    // The picture and the Deployment outputs work from a manifest too.
    let svg = temp_file("prestop.svg", "");
    let o = plan(
        &fixture("prestop.json"),
        &["--svg", svg.to_str().unwrap(), "--kubernetes"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("</svg>"));
    let yaml = stdout(&o);
    let deployment: k8s_openapi::api::apps::v1::Deployment = serde_norway::from_str(&yaml).unwrap();
    assert!(deployment.spec.template.spec.is_some());
}

#[test]
fn json_round_trips_into_the_documented_types() {
    let o = lameduck(&[
        "plan",
        "--probe-interval=10s",
        "--probe-timeout=10s",
        "--unhealthy-threshold=2",
        "--shutdown-delay=20s",
        "--propagation-delay=1ns",
        "--json",
    ]);
    let r = json::<PlanReport>(&o);
    assert!(!r.safe);
    assert_eq!(
        r.detection_worst_case_seconds,
        Seconds(Duration::new(30, 1))
    );
    assert!(stdout(&o).contains("\"detection_worst_case_seconds\": 30.000000001"));
    assert_eq!(r.problems[0].kind, "detection_after_stop_accepting");
    assert!(r
        .timeline
        .iter()
        .any(|e| e.tag == "P2" && e.probe == Some(2)));
    assert!(r.deployment.is_none() && r.kubernetes.is_none());
    // Serializing the parsed report gives the same document.
    let again = serde_json::to_string_pretty(&r).unwrap() + "\n";
    assert_eq!(again, stdout(&o));
}

#[test]
fn unusable_manifests_get_a_clear_message() {
    let aws = aws_text();
    let exec = aws.replace(
        "httpGet:\n              path: /readyz\n              port: http",
        "exec:\n              command: [cat, /tmp/ready]",
    );
    let cases: Vec<(PathBuf, Vec<&str>, &str)> = vec![
        (
            fixture("aws.yaml"),
            vec!["--container", "log-shipper"],
            "container \"log-shipper\" has no readinessProbe",
        ),
        (
            fixture("aws.yaml"),
            vec!["--container", "nope"],
            "has no container named \"nope\" (containers: \"checkout\", \"log-shipper\")",
        ),
        (
            temp_file("exec.yaml", &exec),
            vec![],
            "readinessProbe of type exec, which does not ask /readyz",
        ),
        (
            temp_file("service.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n"),
            vec![],
            "no Deployment in the file (found: Service)",
        ),
        (
            temp_file("two.yaml", format!("{aws}\n---\n{}", aws.replace("name: checkout\nspec:\n  replicas", "name: other\nspec:\n  replicas"))),
            vec![],
            "several Deployments (\"checkout\", \"other\"); choose one with --deployment-name",
        ),
        (
            temp_file("broken.yaml", "kind: Deployment\nspec: [\n"),
            vec![],
            "document 1 is not valid YAML or JSON",
        ),
        (
            temp_file("schema.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: many}\n"),
            vec![],
            "does not match the apps/v1 Deployment schema",
        ),
        (
            temp_file("zero.yaml", aws.replace("periodSeconds: 10", "periodSeconds: 0")),
            vec![],
            "readinessProbe.periodSeconds must be at least 1 (got 0)",
        ),
        (
            temp_file(
                "slow-probe.yaml",
                aws.replace("periodSeconds: 10", "periodSeconds: 5"),
            ),
            vec![],
            "readinessProbe.timeoutSeconds (10) is longer than periodSeconds (5)",
        ),
        (
            temp_file("env.yaml", aws.replace("=30s", "=$(DELAY)")),
            vec![],
            "sets --shutdown-delay from an environment variable",
        ),
        (
            PathBuf::from("/nonexistent-dir/deploy.yaml"),
            vec![],
            "can not read --deployment /nonexistent-dir/deploy.yaml",
        ),
    ];
    for (file, extra, want) in cases {
        let o = plan(&file, &extra);
        let err = stderr(&o);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{file:?} {extra:?}: {err}{}",
            stdout(&o)
        );
        assert!(err.starts_with("error: "), "{err}");
        assert!(err.contains(want), "{file:?}: {want:?} in {err}");
        assert!(stdout(&o).is_empty());
    }
    // With the load balancer's settings on the command line, a missing probe is a note.
    let o = plan(
        &fixture("aws.yaml"),
        &[
            "--container=log-shipper",
            "--probe-interval=5s",
            "--shutdown-delay=20s",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("has no readinessProbe"),
        "{}",
        stdout(&o)
    );
    // An unresolved flag given on the command line is fine.
    let o = plan(
        &temp_file("env2.yaml", aws.replace("=30s", "=$(DELAY)")),
        &["--shutdown-delay=30s"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // --deployment-name picks one; --container needs --deployment.
    let two = temp_file(
        "two-named.yaml",
        format!(
            "{aws}\n---\n{}",
            aws.replace(
                "name: checkout\nspec:\n  replicas",
                "name: other\nspec:\n  replicas"
            )
        ),
    );
    let o = plan(&two, &["--deployment-name", "other"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = lameduck(&["plan", "--container", "x"]);
    assert_eq!(o.status.code(), Some(2));
}
