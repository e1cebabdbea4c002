//! The `lameduck` binary: text, JSON, SVG and Kubernetes outputs, exit codes, errors.

use std::process::Output;

mod common;
use common::{lameduck, stderr, stdout, temp_path, AWS_PROBES};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

fn aws(extra: &[&str]) -> Output {
    let mut args = vec!["plan"];
    args.extend_from_slice(&AWS_PROBES);
    args.extend_from_slice(extra);
    lameduck(&args)
}

#[test]
fn acceptance_30s_is_safe() {
    let o = aws(&["--shutdown-delay", "30s"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("worst case t = 2 × 10s + 10s = 30s"), "{out}");
    assert!(
        out.contains("verdict        SAFE: worst-case detection 30s <= shutdown delay 30s"),
        "{out}"
    );
    assert!(!out.contains("minimum safe shutdown delay"), "{out}");
    // The timeline, in order.
    let order = ["E1", "E2", "P0", "P1", "P2", "LB", "E3", "DN", "EXIT"];
    let mut last = 0;
    for tag in order {
        let at = out[last..]
            .find(&format!("  {tag} "))
            .unwrap_or_else(|| panic!("{tag} after byte {last}:\n{out}"));
        last += at;
    }
    assert!(out
        .contains("out of service: no new requests from the load balancer (worst case, t = 30s)"));
    // Without --termination-grace-period the budget is not checked, but the default is noted.
    assert!(
        out.contains("terminationGracePeriodSeconds not checked"),
        "{out}"
    );
    assert!(
        out.contains("suggested      terminationGracePeriodSeconds: 95"),
        "{out}"
    );
    assert!(
        out.contains("note: Kubernetes' default terminationGracePeriodSeconds (30)"),
        "{out}"
    );
    assert!(stderr(&o).is_empty());
}

#[test]
fn acceptance_20s_is_unsafe_and_names_30s() {
    let o = aws(&["--shutdown-delay", "20s"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("UNSAFE: worst-case detection 30s > shutdown delay 20s"),
        "{out}"
    );
    assert!(
        out.contains("minimum safe shutdown delay: 30s (--shutdown-delay 30s)"),
        "{out}"
    );
    assert!(out.contains("requests sent in the last 10s fail"), "{out}");
    assert!(
        out.contains("E2 + t <= E3: 0s + 30s <= 20s (shutdown delay): FAILS"),
        "{out}"
    );
}

#[test]
fn termination_budget_exit_codes() {
    let o = aws(&[
        "--shutdown-delay=30s",
        "--request-timeout=10s",
        "--termination-grace-period=46",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("terminationGracePeriodSeconds 46s: fits"));
    let o = aws(&["--shutdown-delay=30s", "--termination-grace-period=30"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("UNSAFE: the termination does not fit"),
        "{out}"
    );
    assert!(
        out.contains(
            "the worst-case termination takes 1m30s but terminationGracePeriodSeconds is 30s"
        ),
        "{out}"
    );
    assert!(
        out.contains("minimum terminationGracePeriodSeconds: 90 (suggested: 95)"),
        "{out}"
    );
    // A Go-style duration works too.
    let o = aws(&[
        "--shutdown-delay=30s",
        "--termination-grace-period",
        "1m40s",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn retry_after_mode_and_hooks_in_the_text() {
    let o = aws(&[
        "--shutdown-delay=30s",
        "--request-timeout=20s",
        "--shutdown-send-retry-after",
        "--pre-shutdown-hooks=35s",
        "--shutdown-watch-termination-grace-period=10s",
        "--propagation-delay=2s",
        "--termination-grace-period=60",
    ]);
    let out = stdout(&o);
    // 32 s detection > 30 s delay: the hooks do not count.
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("retry-after mode"), "{out}");
    assert!(out.contains("t = 2 × 10s + 10s + 2s = 32s"), "{out}");
    assert!(
        out.contains("new requests get 429 (at the latest; after the hooks)"),
        "{out}"
    );
    assert!(out.contains("HTTPServerStoppedListening"), "{out}");
    // 35 + 20 + 2
    assert!(out.contains("worst-case termination 57s"), "{out}");
    assert!(
        out.contains("terminationGracePeriodSeconds 1m0s: fits"),
        "{out}"
    );
}

#[test]
fn json_output() {
    let o = aws(&[
        "--shutdown-delay",
        "20s",
        "--json",
        "--propagation-delay",
        "500ms",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    assert_eq!(v["safe"], false);
    assert_eq!(v["mode"], "A");
    assert_eq!(v["detection_worst_case_seconds"], 30.5);
    assert_eq!(v["min_safe_shutdown_delay_seconds"], 30.5);
    assert_eq!(v["shutdown_delay_seconds"], 20);
    assert_eq!(v["total_worst_case_seconds"], 80);
    assert_eq!(v["suggested_termination_grace_period_seconds"], 85);
    assert_eq!(
        v["termination_grace_period_seconds"],
        serde_json::Value::Null
    );
    assert_eq!(v["input"]["unhealthy_threshold"], 2);
    assert_eq!(v["input"]["probe_interval_seconds"], 10);
    assert_eq!(v["input"]["propagation_delay_seconds"], 0.5);
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0]["kind"], "detection_after_stop_accepting");
    assert!(problems[0]["message"].as_str().unwrap().contains("30.5s"));
    let timeline = v["timeline"].as_array().unwrap();
    let probes: Vec<_> = timeline
        .iter()
        .filter(|e| e["kind"] == "probe_fails")
        .collect();
    assert_eq!(probes.len(), 2);
    assert_eq!(probes[1]["tag"], "P2");
    assert_eq!(probes[1]["probe"], 2);
    assert_eq!(probes[1]["at_seconds"], 20);
    assert_eq!(probes[1]["end_seconds"], 30);
    let lb = timeline.iter().find(|e| e["tag"] == "LB").unwrap();
    assert_eq!(lb["at_seconds"], 30.5);
    assert_eq!(lb["kind"], "out_of_service");
    assert!(v.get("kubernetes").is_none());

    let o = aws(&["--shutdown-delay", "30s", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["safe"], true);
    assert_eq!(v["problems"].as_array().unwrap().len(), 0);

    // With --kubernetes the snippet rides along; zero request timeout gives nulls.
    let o = aws(&[
        "--shutdown-delay=30s",
        "--request-timeout=0",
        "--json",
        "--kubernetes",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["total_worst_case_seconds"], serde_json::Value::Null);
    assert_eq!(
        v["normal_drain_worst_case_seconds"],
        serde_json::Value::Null
    );
    assert!(v["kubernetes"].as_str().unwrap().contains("readinessProbe"));
}

/// Checks that the tags are balanced and well nested: a tiny XML check.
fn assert_balanced(xml: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = xml;
    while let Some(open) = rest.find('<') {
        let close = rest[open..].find('>').expect("tag ends") + open;
        let tag = &rest[open + 1..close];
        rest = &rest[close + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name.trim()), "closing {name}");
        } else if !tag.ends_with('/') {
            let name = tag.split_whitespace().next().unwrap();
            stack.push(name.to_string());
        }
        // Text between tags may not hold a raw '<' or an unescaped '&'.
        let text_end = rest.find('<').unwrap_or(rest.len());
        let text = &rest[..text_end];
        for (i, _) in text.match_indices('&') {
            let entity = &text[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;"]
                    .iter()
                    .any(|e| entity.starts_with(e)),
                "raw & in {text:?}"
            );
        }
    }
    assert!(stack.is_empty(), "unclosed {stack:?}");
}

#[test]
fn svg_output() {
    let path = temp_path("unsafe.svg");
    let o = aws(&["--shutdown-delay", "20s", "--svg", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains(&format!("timeline picture: {}", path.display())));
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(
        svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{svg}"
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_balanced(&svg);
    for label in [
        ">P0<",
        ">P1<",
        ">P2<",
        "UNSAFE",
        "E3 NotAcceptingNewRequest 20s",
        "LB out of service t=30s",
        "red band",
    ] {
        assert!(svg.contains(label), "{label}");
    }
    assert!(!svg.contains(">P3<"));

    let path = temp_path("safe-b.svg");
    let o = aws(&[
        "--shutdown-delay=30s",
        "--shutdown-send-retry-after",
        "--pre-shutdown-hooks=5s",
        "--shutdown-watch-termination-grace-period=10s",
        "--termination-grace-period=30",
        "--json",
        &format!("--svg={}", path.display()),
    ]);
    // JSON stays pure JSON when a picture is written.
    let _: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert_balanced(&svg);
    for label in [
        "429 Retry-After",
        "hooks run",
        "long-running drain",
        "HTTP shutdown",
        "SIGKILL 30s",
        "terminationGracePeriodSeconds 30s",
    ] {
        assert!(svg.contains(label), "{label}");
    }

    // An unwritable path is an output error.
    let o = aws(&[
        "--shutdown-delay=30s",
        "--svg",
        "/nonexistent-dir/x/plan.svg",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("can not write --svg /nonexistent-dir/x/plan.svg"),
        "{}",
        stderr(&o)
    );
}

/// The `--kubernetes` output, parsed back into `k8s-openapi`'s typed Deployment.
fn parse_deployment(yaml: &str) -> Deployment {
    serde_norway::from_str(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

#[test]
fn kubernetes_snippet() {
    let o = aws(&["--shutdown-delay=30s", "--kubernetes"]);
    assert_eq!(o.status.code(), Some(0));
    let yaml = stdout(&o);
    assert!(yaml.starts_with("# lameduck plan: SAFE"), "{yaml}");
    let deployment = parse_deployment(&yaml);
    let pod = deployment.spec.template.spec.expect("pod spec");
    let container = &pod.containers[0];
    let readiness = container.readiness_probe.as_ref().unwrap();
    let get = readiness.http_get.as_ref().unwrap();
    assert_eq!(get.path.as_deref(), Some("/readyz"));
    assert_eq!(get.port, IntOrString::String("http".into()));
    assert_eq!(readiness.period_seconds, Some(10));
    assert_eq!(readiness.timeout_seconds, Some(10));
    assert_eq!(readiness.failure_threshold, Some(2));
    let liveness = container.liveness_probe.as_ref().unwrap();
    assert_eq!(
        liveness.http_get.as_ref().unwrap().path.as_deref(),
        Some("/livez")
    );
    let args = container.args.clone().unwrap();
    assert!(args.contains(&"--shutdown-delay=30s".into()), "{args:?}");
    assert!(args.contains(&"--request-timeout=1m0s".into()), "{args:?}");
    assert!(!args.contains(&"--shutdown-send-retry-after".into()));
    // The worst case is 90 s; the snippet's budget covers it, plus 5 s.
    assert_eq!(pod.termination_grace_period_seconds, Some(95));
    let labels = deployment.spec.selector.match_labels.unwrap();
    assert_eq!(
        Some(&labels),
        deployment
            .spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref())
    );

    // Retry-after mode, a larger given budget wins, rounding is commented, problems are comments.
    let o = lameduck(&[
        "plan",
        "--probe-interval=1500ms",
        "--probe-timeout=1s",
        "--unhealthy-threshold=2",
        "--shutdown-delay=2s",
        "--shutdown-send-retry-after",
        "--termination-grace-period=300",
        "--kubernetes",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let yaml = stdout(&o);
    assert!(yaml.starts_with("# lameduck plan: UNSAFE"), "{yaml}");
    assert!(
        yaml.contains("#   - the load balancer may take 4s"),
        "{yaml}"
    );
    assert!(
        yaml.contains("# readinessProbe.periodSeconds: 2, rounded up from 1.5s"),
        "{yaml}"
    );
    let deployment = parse_deployment(&yaml);
    let pod = deployment.spec.template.spec.unwrap();
    assert_eq!(pod.termination_grace_period_seconds, Some(300));
    let container = &pod.containers[0];
    assert_eq!(
        container.readiness_probe.as_ref().unwrap().period_seconds,
        Some(2)
    );
    assert!(container
        .args
        .as_ref()
        .unwrap()
        .contains(&"--shutdown-send-retry-after".into()));

    // In the JSON output the same YAML rides along as a string.
    let o = aws(&["--shutdown-delay=30s", "--json", "--kubernetes"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let deployment = parse_deployment(v["kubernetes"].as_str().unwrap());
    assert_eq!(deployment.metadata.name.as_deref(), Some("my-service"));
}

#[test]
fn invalid_input_exits_2_naming_the_flag() {
    let cases: [(&[&str], &[&str]); 13] = [
        (
            &["--probe-interval", "0s"],
            &["--probe-interval must be greater than zero"],
        ),
        (
            &["--probe-interval", "-10s"],
            &["'-10s'", "--probe-interval", "can not be a negative value"],
        ),
        (
            &["--probe-interval", "ten"],
            &["'ten'", "--probe-interval", "expected numbers with units"],
        ),
        (
            &["--probe-timeout", "0"],
            &["--probe-timeout must be greater than zero"],
        ),
        (
            &["--probe-timeout", "11s"],
            &["--probe-timeout (11s) can not be longer than --probe-interval (10s)"],
        ),
        (
            &["--unhealthy-threshold", "0"],
            &["--unhealthy-threshold must be at least 1"],
        ),
        (
            &["--unhealthy-threshold", "two"],
            &["'two'", "--unhealthy-threshold", "expected a whole number"],
        ),
        (
            &["--shutdown-delay", "-1s"],
            &["'-1s'", "--shutdown-delay", "can not be a negative value"],
        ),
        (
            &["--request-timeout", "10"],
            &["'10'", "--request-timeout", "missing unit"],
        ),
        (
            &["--termination-grace-period", "soon"],
            &["'soon'", "--termination-grace-period"],
        ),
        (
            &["--shutdown-delay"],
            &["a value is required for '--shutdown-delay <D>'"],
        ),
        (&["--frobnicate"], &["unexpected argument '--frobnicate'"]),
        // A misspelt flag gets a suggestion.
        (
            &["--shutdown-dealy", "30s"],
            &["tip: a similar argument exists: '--shutdown-delay'"],
        ),
    ];
    for (extra, wants) in cases {
        let o = aws(extra);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
        for want in wants {
            assert!(err.contains(want), "{extra:?}: {want:?} in {err}");
        }
        assert!(stdout(&o).is_empty());
    }
    // Overlapping probes allow a timeout above the interval.
    let o = aws(&[
        "--probe-timeout=15s",
        "--overlapping-probes",
        "--shutdown-delay=35s",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("t = 2 × 10s + 15s = 35s"));
}

#[test]
fn help_and_usage() {
    let o = lameduck(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("lameduck plan [flags]"));
    assert!(stdout(&o).contains("Exit status: 0 safe, 1 unsafe, 2"));
    assert!(stdout(&o).contains("completions"));
    for args in [&["plan", "--help"][..], &["help", "plan"], &["plan", "-h"]] {
        let o = lameduck(args);
        assert_eq!(o.status.code(), Some(0));
        let out = stdout(&o);
        for flag in [
            "--probe-interval",
            "--probe-timeout",
            "--unhealthy-threshold",
            "--propagation-delay",
            "--overlapping-probes",
            "--shutdown-delay",
            "--request-timeout",
            "--shutdown-watch-termination-grace-period",
            "--shutdown-send-retry-after",
            "--observed",
            "--pre-shutdown-hooks",
            "--termination-grace-period",
            "--deployment",
            "--container",
            "--json",
            "--svg",
            "--kubernetes",
            "Exit status: 0 safe, 1 unsafe",
        ] {
            assert!(out.contains(flag), "{flag}");
        }
    }
    // No command: the help on stderr, exit 2.
    let o = lameduck(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Usage: lameduck <COMMAND>"));
    let o = lameduck(&["deploy"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unrecognized subcommand 'deploy'"));
    let o = lameduck(&["pln"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("a similar subcommand exists: 'plan'"));
    for flag in ["--version", "-V"] {
        let o = lameduck(&[flag]);
        assert_eq!(o.status.code(), Some(0));
        assert!(stdout(&o).starts_with("lameduck 0.1.0"));
    }
}

#[test]
fn completions() {
    for (shell, marker, flag) in [
        ("bash", "complete -F", "--deployment"),
        ("zsh", "#compdef lameduck", "--deployment"),
        ("fish", "complete -c lameduck", "-l deployment"),
    ] {
        let o = lameduck(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", stderr(&o));
        let script = stdout(&o);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains(flag), "{shell}: {script}");
    }
    let o = lameduck(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid value 'tcsh'"));
}
