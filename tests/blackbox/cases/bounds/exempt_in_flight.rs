//! An exempt request (`/metrics`) in flight when the drain starts completes before the exit,
//! in both modes.

use std::time::{Duration, Instant};

use super::{get_in_thread, poll_exit};
use crate::support::*;

const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4";

const METRICS_DELAY: Duration = Duration::from_secs(2);

/// Asserts a `/metrics` reply: 200, the exposition content type, both in-flight gauges and
/// a `lameduck_signal_fired` sample (0 or 1) per termination signal; those in `fired` must
/// show 1, and with `others_unfired` the others 0.
#[track_caller]
fn assert_metrics(resp: &Response, fired: &[&str], others_unfired: bool, what: &str) {
    assert_eq!(resp.status(), 200, "{what}\n{resp}");
    assert_eq!(
        resp.header("content-type"),
        Some(METRICS_CONTENT_TYPE),
        "{what}: Content-Type\n{resp}"
    );
    let body = resp.text();
    for class in ["normal", "long_running"] {
        let prefix = format!("lameduck_in_flight_requests{{class=\"{class}\"}} ");
        assert!(
            body.lines().any(|l| l
                .strip_prefix(&prefix)
                .is_some_and(|n| n.parse::<u64>().is_ok())),
            "{what}: no `{prefix}N` sample\n{resp}"
        );
    }
    for signal in TERMINATION_SIGNALS {
        let prefix = format!("lameduck_signal_fired{{signal=\"{signal}\"}} ");
        let value = body.lines().find_map(|l| l.strip_prefix(&prefix));
        let want: &[&str] = match (fired.contains(&signal), others_unfired) {
            (true, _) => &["1"],
            (false, true) => &["0"],
            (false, false) => &["0", "1"],
        };
        assert!(
            value.is_some_and(|v| want.contains(&v)),
            "{what}: `{prefix}` is {value:?}, want one of {want:?}\n{resp}"
        );
    }
}

fn exempt_request_in_flight_at_drain(bin: &'static str, flags: &[&str]) {
    let mut server = ServerProcess::start(bin, flags);
    let addr = server.addr;
    assert_metrics(
        &get(addr, "/metrics"),
        &[],
        true,
        "GET /metrics while serving",
    );
    let bad = get(addr, "/metrics?delay=bogus");
    assert_eq!(bad.status(), 400, "GET /metrics?delay=bogus\n{bad}");
    assert!(
        bad.text().contains("bogus"),
        "the 400 body should carry the parse error\n{bad}"
    );

    // The reader: bounded by its read timeout.
    let (sent, reader) = get_in_thread(
        addr,
        "/metrics?delay=2s",
        Duration::from_secs(10),
        "slow-scrape",
    );
    std::thread::sleep(Duration::from_millis(100));
    let signal = server.signal("TERM");

    // Watch for an exit while the scrape is in flight (the read timeout bounds the reader).
    let mut exited_at = None;
    let give_up = sent + Duration::from_secs(15);
    while !reader.is_finished() && Instant::now() < give_up {
        if exited_at.is_none() {
            exited_at = poll_exit(&mut server, Instant::now(), Duration::ZERO).map(|(_, at)| at);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        reader.is_finished(),
        "no reply to /metrics?delay=2s within 15 s\n{}",
        server.describe()
    );
    let (resp, resp_at) = reader.join().expect("reader thread");
    let ms = |at: Instant| at.saturating_duration_since(sent);
    let timeline = format!(
        "SIGTERM {:?}, reply {:?}, exit seen {:?}, InFlightRequestsDrained {:?} after the \
         request",
        ms(signal.before),
        ms(resp_at),
        exited_at.map(ms),
        server.signals().time_of(IN_FLIGHT_DRAINED).map(ms),
    );
    eprintln!("{bin} {flags:?} slow scrape across the drain: {timeline}");
    let resp = resp.unwrap_or_else(|e| {
        panic!(
            "/metrics?delay=2s in flight at SIGTERM: {e}: {timeline}\n{}",
            server.describe()
        )
    });
    assert_metrics(
        &resp,
        &[SHUTDOWN_INITIATED, AFTER_SHUTDOWN_DELAY, NOT_ACCEPTING],
        false,
        "/metrics?delay=2s in flight at SIGTERM (sampled after the delay)",
    );
    assert!(
        ms(resp_at) + Duration::from_millis(100) >= METRICS_DELAY,
        "the reply came before the 2 s delay: {timeline}"
    );
    let exited_early =
        exited_at.is_some_and(|at| ms(at) + Duration::from_millis(100) < METRICS_DELAY);
    assert!(
        !exited_early,
        "the process exited before the in-flight exempt request could finish: {timeline}"
    );
    server.assert_exit(0, Duration::from_secs(10));
    server.signals().assert_common_dag_order();
    server.assert_trace_legal(flags);
}

/// Close-listener mode: `GET /metrics?delay=2s` (exempt from admission) in flight at SIGTERM
/// (no shutdown delay): its reply arrives complete and the process exits 0 after it.
pub fn exempt_request_in_flight_at_drain_completes(bin: &'static str) {
    exempt_request_in_flight_at_drain(bin, &[]);
}

/// The same in retry-after mode (`--shutdown-send-retry-after`).
pub fn exempt_request_in_flight_at_drain_completes_retry_after_mode(bin: &'static str) {
    exempt_request_in_flight_at_drain(bin, &["--shutdown-send-retry-after"]);
}
