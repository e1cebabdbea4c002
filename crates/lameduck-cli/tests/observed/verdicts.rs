//! What the logs alone say: a clean log holds with its margin; late connections exit 1 and
//! double the delay (rounded up to 500 ms), or follow the readiness probes the server saw;
//! late requests alone are only reported; a configured delay shorter than the logs need
//! fails; an old summary line counts as without late connections.

use lameduck_cli::report::ObservedOnlyReport;

use crate::common::{json, stderr, stdout};
use crate::{code, fixture, observed, secs, summary, temp};

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
    let report = json::<ObservedOnlyReport>(&observed(&[&fixture("smol-late.log")], &["--json"]));
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
    let r = json::<ObservedOnlyReport>(&observed(&[&log], &["--json"])).observed;
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
    let r =
        json::<ObservedOnlyReport>(&observed(&[&fixture("old-format.log")], &["--json"])).observed;
    assert_eq!(r.terminations_without_arrivals, 1);
    assert_eq!(r.last_new_connection_seconds, None);
}
