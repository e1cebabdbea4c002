//! What the server sees of its load balancer (`docs/load-balancers.md`): the termination
//! summary's `last_new_connection`, `late_connections` and `requests_before_ready`, and the
//! warnings that go with them, against what the test itself sent.

use std::time::Duration;

use crate::support::*;

/// One `GET /` on a new connection `after` the signal was sent; asserts 200.
fn new_connection_at(addr: std::net::SocketAddr, sent: &SignalSent, after: Duration) {
    sleep_until(sent.after + after);
    assert_reply(&get(addr, "/"), 200, "ok", "GET / in the shutdown delay");
}

fn warning_lines(server: &ServerProcess, what: &str) -> Vec<String> {
    // The logs go to stderr.
    server
        .stderr_text()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(what))
        .map(String::from)
        .collect()
}

/// A connection 0.3 s into a 2 s delay is not late; one at 1.8 s is, and the warning says
/// so once, at `NotAcceptingNewRequest`.
pub fn late_connections_are_reported(bin: &'static str) {
    let mut server = ServerProcess::start(bin, &["--shutdown-delay", "2s"]);
    let addr = server.addr;
    assert_reply(&get(addr, "/"), 200, "ok", "GET / before the signal");
    let sent = server.signal("TERM");
    new_connection_at(addr, &sent, Duration::from_millis(300));
    let early = warning_lines(&server, "late connections");
    new_connection_at(addr, &sent, Duration::from_millis(1800));
    server.assert_exit(0, Duration::from_secs(15));
    assert!(
        early.is_empty(),
        "no warning before the delay ends: {early:?}"
    );
    let summary = server.summary().expect("a termination summary");
    let a = summary.arrivals;
    assert_eq!(a.late_connections, 1, "{}", server.describe());
    assert_eq!(a.late_requests, 1, "{}", server.describe());
    let last = a.last_new_connection.expect("last_new_connection");
    assert!(
        last >= Duration::from_millis(1750) && last < Duration::from_secs(2),
        "last_new_connection {last:?}\n{}",
        server.describe()
    );
    assert_eq!(a.requests_before_ready, 0);
    let warnings = warning_lines(&server, "late connections");
    assert_eq!(warnings.len(), 1, "{}", server.describe());
    assert!(
        warnings[0].contains("[graceful-termination]"),
        "{warnings:?}"
    );
    assert!(
        !warnings[0].contains("name="),
        "not a signal line: {warnings:?}"
    );
}

/// A balancer that stops within the first 80 % of the delay: no late arrival, no warning,
/// although its health checks still open connections late in the delay (as HAProxy does).
pub fn timely_connections_are_not_late(bin: &'static str) {
    let mut server = ServerProcess::start(bin, &["--shutdown-delay", "1s"]);
    let addr = server.addr;
    let sent = server.signal("TERM");
    new_connection_at(addr, &sent, Duration::from_millis(200));
    sleep_until(sent.after + Duration::from_millis(900));
    assert_eq!(
        get(addr, "/readyz").status(),
        500,
        "a health check late in the delay"
    );
    server.assert_exit(0, Duration::from_secs(15));
    let a = server.summary().expect("a termination summary").arrivals;
    assert_eq!((a.late_connections, a.late_requests), (0, 0));
    let last = a.last_new_connection.expect("last_new_connection");
    assert!(last < Duration::from_millis(700), "{last:?}");
    assert!(warning_lines(&server, "late connections").is_empty());
}

/// Requests sent while `/readyz` answers 500 (a post-start hook still running) are counted,
/// with one warning; none after it said ready.
pub fn requests_before_ready_are_counted(bin: &'static str) {
    let mut server = ServerProcess::start(
        bin,
        &["--post-start-hook-duration", "2s", "--shutdown-delay", "0s"],
    );
    let addr = server.addr;
    assert_eq!(
        get(addr, "/readyz").status(),
        500,
        "/readyz before the hook ends"
    );
    for _ in 0..3 {
        assert_reply(&get(addr, "/"), 200, "ok", "GET / before ready");
    }
    // Health and metrics are not traffic.
    let _ = get(addr, "/livez");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while get(addr, "/readyz").status() != 200 {
        assert!(std::time::Instant::now() < deadline, "never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_reply(&get(addr, "/"), 200, "ok", "GET / once ready");
    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(15));
    let a = server.summary().expect("a termination summary").arrivals;
    assert_eq!(a.requests_before_ready, 3, "{}", server.describe());
    assert_eq!(
        warning_lines(&server, "request before ready").len(),
        1,
        "{}",
        server.describe()
    );
}
