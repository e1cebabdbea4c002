//! `lameduck plan --observed FILE...`: termination summaries read from server logs of every
//! runtime, the figures, the recommendation alone and next to the model's, `--json`,
//! `--deployment`, and the errors for logs that can not be used.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;
use common::{lameduck, stderr, stdout};

use lameduck_cli::report::{ObservedOnlyReport, PlanReport, Seconds};
use proptest::prelude::*;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/observed")
        .join(name)
        .display()
        .to_string()
}

/// Writes `bytes` to a file of this test process.
fn temp(name: &str, bytes: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("lameduck-observed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

/// `lameduck plan --observed FILES... EXTRA...`.
fn observed(files: &[&str], extra: &[&str]) -> Output {
    let mut args = vec!["plan", "--observed"];
    args.extend_from_slice(files);
    args.extend_from_slice(extra);
    lameduck(&args)
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn observed_json(o: &Output) -> ObservedOnlyReport {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}\n{}", stdout(o)))
}

fn plan_json(o: &Output) -> PlanReport {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}\n{}", stdout(o)))
}

fn secs(s: f64) -> Seconds {
    Seconds(Duration::from_secs_f64(s))
}

/// A summary line as the hyper adapter logs it.
fn summary(lame_duck: &str, arrivals: &str) -> String {
    format!(
        "2026-11-27T05:07:33.916Z INFO lameduck_hyper::server: [graceful-termination] \
         termination summary: cause=signal signal_to_exit=3.503s lame_duck={lame_duck} \
         normal_drain=1.002s long_running_drain=- requests_drained=3 requests_remaining=0 \
         streams_ended=0 streams_remaining=0 rejected=0 rejected_not_accepting=0 \
         rejected_retry_after=0 rejected_request_timeout=0 rejected_routes_not_ready=0 \
         {arrivals} code=0\n"
    )
}

const SMALL_PROBES: [&str; 6] = [
    "--probe-interval",
    "1s",
    "--probe-timeout",
    "500ms",
    "--unhealthy-threshold",
    "1",
];

const AWS_PROBES: [&str; 6] = [
    "--probe-interval",
    "10s",
    "--probe-timeout",
    "10s",
    "--unhealthy-threshold",
    "2",
];

#[test]
fn a_clean_log_holds_with_its_margin() {
    let o = observed(&[&fixture("tokio-clean.log")], &[]);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(0), "{out}{}", stderr(&o));
    assert!(stderr(&o).is_empty());
    assert!(out.contains("terminations   2 in 1 file"), "{out}");
    assert!(out.contains("shutdown delay 5s observed"), "{out}");
    assert!(
        out.contains("last new conn  1.9s after the signal"),
        "{out}"
    );
    assert!(
        out.contains("margin         3.1s left in the shutdown delay"),
        "{out}"
    );
    assert!(out.contains("late conns     none"), "{out}");
    assert!(out.contains("late requests  3 (reported only"), "{out}");
    assert!(
        out.contains(
            "observed       HOLDS: no termination had late connections: the shutdown delay 5s \
             holds, with 3.1s margin"
        ),
        "{out}"
    );
    // Never below the delay in use; the smaller value is only an option.
    assert!(
        out.contains("recommended    --shutdown-delay 5s: keep it"),
        "{out}"
    );
    assert!(
        out.contains("reduction      optional: --shutdown-delay 2.4s"),
        "{out}"
    );
    // No model without the load balancer's flags.
    assert!(!out.contains("worst-case timeline"), "{out}");
}

#[test]
fn late_connections_exit_1_and_double_the_delay() {
    let o = observed(&[&fixture("smol-late.log")], &[]);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(1), "{out}{}", stderr(&o));
    assert!(
        out.contains("observed       LATE: 1 of 2 terminations had late connections (3 in all)"),
        "{out}"
    );
    assert!(
        out.contains(
            "recommended    --shutdown-delay 4s at least: 2 × the observed delay 2s, rounded up \
             to 500ms"
        ),
        "{out}"
    );
    assert!(
        out.contains("the true detection time is unknown from the logs"),
        "{out}"
    );
    assert!(!out.contains("reduction"), "{out}");
    // Traffic before ready is noted.
    assert!(out.contains("before ready   2 requests"), "{out}");
    assert!(
        out.contains("the load balancer sends traffic before the readiness probe passes"),
        "{out}"
    );
    let report = observed_json(&observed(&[&fixture("smol-late.log")], &["--json"]));
    let r = report.observed;
    assert!(!report.safe);
    assert!(r.has_late_connections);
    let delay = r.shutdown_delay_max_seconds.unwrap().0;
    let recommended = r.recommended_shutdown_delay_seconds.unwrap().0;
    assert!(recommended >= delay * 2, "{recommended:?} {delay:?}");
    assert_eq!(recommended.as_nanos() % 500_000_000, 0);
}

#[test]
fn the_late_minimum_is_rounded_up_to_500ms() {
    let log = temp(
        "late-2100.log",
        summary(
            "2.100s",
            "last_new_connection=1.800s last_new_request=- late_connections=1 late_requests=0 \
             requests_before_ready=0",
        )
        .as_bytes(),
    );
    let o = observed(&[&log], &[]);
    assert_eq!(code(&o), Some(1));
    assert!(
        stdout(&o).contains("--shutdown-delay 4.5s at least: 2 × the observed delay 2.1s"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn the_readiness_probes_seen_estimate_the_balancers_detection() {
    // HAProxy `inter 2s fall 3` against a 2 s delay: the server saw /readyz every 2 s before
    // the signal, one failed probe after it, and connections until the listener closed.
    let log = temp(
        "late-probed.log",
        summary(
            "2.000s",
            "last_new_connection=1.995s last_new_request=1.996s late_connections=14 \
             late_requests=14 requests_before_ready=0 readyz_probe_interval=2.001s \
             failed_readyz_probes=1",
        )
        .as_bytes(),
    );
    let o = observed(&[&log], &[]);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(1), "{out}");
    // 3 × 2.001 s + 0.5 s = 6.503 s, out of the last 20 %: 8.2 s, rounded up to 500 ms.
    assert!(
        out.contains(
            "recommended    --shutdown-delay 8.5s at least: the balancer probed /readyz every \
             2.001s and still sent after 1 failed probe"
        ),
        "{out}"
    );
    assert!(
        out.contains("probes         /readyz asked every 2.001s"),
        "{out}"
    );
    assert!(
        out.contains("estimate       the detection time comes from"),
        "{out}"
    );
    let r = observed_json(&observed(&[&log], &["--json"])).observed;
    assert_eq!(r.readyz_probe_interval_seconds, Some(secs(2.001)));
    assert_eq!(r.failed_readyz_probes, 1);
    assert_eq!(r.assumed_failure_threshold, Some(3));
    assert_eq!(r.late_minimum_seconds, Some(secs(4.0)));
    assert_eq!(r.probe_minimum_seconds, Some(secs(8.5)));
    assert_eq!(r.recommended_shutdown_delay_seconds, Some(secs(8.5)));
}

#[test]
fn late_requests_alone_are_reported_never_failed() {
    let log = temp(
        "late-requests.log",
        summary(
            "5.000s",
            "last_new_connection=0.400s last_new_request=4.900s late_connections=0 \
             late_requests=40 requests_before_ready=0",
        )
        .as_bytes(),
    );
    let o = observed(&[&log], &[]);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(0), "{out}");
    assert!(out.contains("late requests  40 (reported only"), "{out}");
    assert!(out.contains("HOLDS"), "{out}");
}

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

#[test]
fn a_configured_delay_shorter_than_the_logs_need_fails() {
    // The latest connection came 1.9s after the signal: under 2s it would be late.
    let o = observed(&[&fixture("tokio-clean.log")], &["--shutdown-delay", "2s"]);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(1), "{out}");
    assert!(out.contains("TOO SHORT"), "{out}");
    assert!(
        out.contains("recommended    --shutdown-delay 2.4s"),
        "{out}"
    );
}

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
    let report = observed_json(&o);
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
    let report = plan_json(&with);
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

#[test]
fn several_files_add_up() {
    let files = [
        fixture("tokio-clean.log"),
        fixture("actix-clean.log"),
        fixture("old-format.log"),
    ];
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let o = observed(&files, &[]);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("terminations   4 in 3 files"), "{out}");
    assert!(out.contains("tokio-clean.log: 2\n"), "{out}");
    // The actix log was written to a terminal: colour codes.
    assert!(out.contains("actix-clean.log: 1\n"), "{out}");
    assert!(
        out.contains("old-format.log: 1, without arrival fields"),
        "{out}"
    );
    // The latest connection is the actix one, the smallest margin too.
    assert!(
        out.contains("last new conn  2.3s after the signal"),
        "{out}"
    );
    assert!(out.contains("margin         2.7s left"), "{out}");
    assert!(out.contains("late requests  5 "), "{out}");
    let report = observed_json(&observed(&files, &["--json"]));
    let counts: Vec<(u64, u64)> = report
        .observed
        .files
        .iter()
        .map(|f| (f.terminations, f.terminations_without_arrivals))
        .collect();
    assert_eq!(counts, [(2, 0), (1, 0), (1, 1)]);
    assert_eq!(report.observed.terminations, 4);
    // The flag repeated, and standard input.
    let mut child = Command::new(env!("CARGO_BIN_EXE_lameduck"))
        .args(["plan", "--observed", "-", "--observed", files[1]])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = std::fs::read(files[0]).unwrap();
    child.stdin.take().unwrap().write_all(&log).unwrap();
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(code(&o), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("terminations   3 in 2 files"), "{out}");
    assert!(out.contains("  - (stdin): 2\n"), "{out}");
}

#[test]
fn an_old_summary_line_counts_as_without_late_connections() {
    let o = observed(&[&fixture("old-format.log")], &[]);
    let out = stdout(&o);
    assert_eq!(code(&o), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("late conns     not recorded"), "{out}");
    assert!(
        out.contains("arrivals were not recorded by that server version"),
        "{out}"
    );
    assert!(
        out.contains("recommended    --shutdown-delay 5s: keep it"),
        "{out}"
    );
    assert!(!out.contains("reduction"), "{out}");
    let r = observed_json(&observed(&[&fixture("old-format.log")], &["--json"])).observed;
    assert_eq!(r.terminations_without_arrivals, 1);
    assert_eq!(r.last_new_connection_seconds, None);
}

#[test]
fn unusable_logs_exit_2_naming_the_file() {
    let empty = temp("empty.log", b"");
    let garbage: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let garbage = temp("garbage.bin", &garbage);
    let huge = temp("huge.log", &vec![b'a'; 3 << 20]);
    let no_summary = fixture("no-summary.log");
    for file in [&empty, &garbage, &huge, &no_summary] {
        let o = observed(&[file], &[]);
        assert_eq!(code(&o), Some(2), "{file}: {}", stdout(&o));
        assert!(stdout(&o).is_empty());
        assert_eq!(
            stderr(&o),
            format!(
                "error: {file}: no termination summary found (is this a lameduck server's log?)\n"
            )
        );
    }
    // A malformed summary: the file, the line and the field.
    let malformed = fixture("malformed.log");
    let o = observed(&[&fixture("tokio-clean.log"), &malformed], &[]);
    assert_eq!(code(&o), Some(2));
    assert!(stdout(&o).is_empty());
    assert_eq!(
        stderr(&o),
        format!(
            "error: {malformed}:2: malformed termination summary: field rejected_not_accepting= \
             is missing (is the line cut short?)\n"
        )
    );
    let bad = temp(
        "bad-value.log",
        summary("2.000s", "late_connections=many").as_bytes(),
    );
    let o = observed(&[&bad], &[]);
    assert_eq!(code(&o), Some(2));
    assert!(
        stderr(&o)
            .contains("bad-value.log:1: malformed termination summary: late_connections=\"many\""),
        "{}",
        stderr(&o)
    );
    // A file that is not there, a directory.
    let missing = temp("x", b"").replace("/x", "/not-there.log");
    let o = observed(&[&missing], &[]);
    assert_eq!(code(&o), Some(2));
    assert!(
        stderr(&o).starts_with(&format!("error: can not read --observed {missing}: ")),
        "{}",
        stderr(&o)
    );
    let dir = std::env::temp_dir().display().to_string();
    let o = observed(&[&dir], &[]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&dir), "{}", stderr(&o));
    // Flags only the model uses need it.
    let o = observed(
        &[&fixture("tokio-clean.log")],
        &["--termination-grace-period", "30"],
    );
    assert_eq!(code(&o), Some(2));
    assert!(
        stderr(&o).contains("--termination-grace-period needs the probe model"),
        "{}",
        stderr(&o)
    );
}

/// aws.yaml with a 2s delay, a probe that detects in 2s, and a 62s grace period (exactly the
/// worst case with 2s).
fn two_second_manifest() -> String {
    let aws = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aws.yaml"),
    )
    .unwrap();
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
    let report = plan_json(&observed(
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
    let aws = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aws.yaml");
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any bytes: a result or an error, never a panic.
    #[test]
    fn any_bytes_are_read_or_refused(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = lameduck_cli::logs::read_bytes("any", &bytes);
    }

    /// Random edits of a real log: the same.
    #[test]
    fn edited_logs_are_read_or_refused(
        cuts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
    ) {
        let mut bytes = std::fs::read(fixture("smol-late.log")).unwrap();
        for (at, byte) in cuts {
            let i = at.index(bytes.len());
            match byte % 3 {
                0 => { bytes.remove(i); }
                1 => bytes[i] = byte,
                _ => bytes.insert(i, byte),
            }
        }
        if let Ok(file) = lameduck_cli::logs::read_bytes("edited", &bytes) {
            prop_assert!(file.observed.terminations >= 1);
        }
    }
}
