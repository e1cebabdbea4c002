//! `/metrics` (`docs/metrics.md`) before, during and after a drain, and the exit summary line,
//! against what the test itself sent.
//!
//! Retry-after mode, so that the server still answers (429s, and exempt scrapes) between
//! `NotAcceptingNewRequest` and the end of the drain: three `/sleep` requests and two `/watch`
//! streams are in flight at the signal, four requests are rejected with 429 during the drain,
//! and a scrape sent during the drain with `after=HTTPServerStoppedListening` is sampled after
//! it.
//!
//! A scrape admitted while the gate is open is itself a tracked normal request, so it counts
//! itself (`normal` is what the test sent, plus one); once the gate is closed it is served
//! untracked.

use std::time::{Duration, Instant};

use lameduck::rejections::RejectionReason;
use lameduck::summary::StopCause;

use crate::support::*;

const FLAGS: &[&str] = &[
    "--shutdown-send-retry-after",
    "--shutdown-delay",
    "1s",
    "--shutdown-watch-termination-grace-period",
    "5s",
];
const SLEEPS: usize = 3;
const WATCHES: usize = 2;
const REJECTED: u64 = 4;
const SLEEP: Duration = Duration::from_secs(4);

/// The value of the sample `series` (name and labels exactly as exposed), if present.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The first scrape that shows phase `serving` (the listener reports serving to the lifecycle
/// just after the `listening on` line), within 5 s.
fn scrape_serving(addr: std::net::SocketAddr) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let body = scrape(addr, "GET /metrics while serving");
        if sample(&body, "lameduck_phase{phase=\"serving\"}") == Some(1.0) {
            return body;
        }
        assert!(Instant::now() < deadline, "phase never serving\n{body}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A scrape of `/metrics` on a new connection: its body, after asserting 200.
fn scrape(addr: std::net::SocketAddr, what: &str) -> String {
    let resp = get(addr, "/metrics");
    assert_eq!(resp.status(), 200, "{what}\n{resp}");
    resp.text()
}

#[track_caller]
fn assert_sample(body: &str, series: &str, want: f64, what: &str) {
    assert_eq!(sample(body, series), Some(want), "{what}: {series}\n{body}");
}

#[track_caller]
fn assert_phase(body: &str, phase: &str, what: &str) {
    assert_sample(
        body,
        &format!("lameduck_phase{{phase=\"{phase}\"}}"),
        1.0,
        what,
    );
}

fn in_flight(body: &str, class: &str) -> Option<f64> {
    sample(
        body,
        &format!("lameduck_in_flight_requests{{class=\"{class}\"}}"),
    )
}

fn retry_after_rejections(body: &str) -> Option<f64> {
    sample(
        body,
        "lameduck_rejected_requests_total{reason=\"retry_after\"}",
    )
}

pub fn metrics_follow_the_drain_and_the_summary_counts_it(bin: &'static str) {
    let mut server = ServerProcess::start(bin, FLAGS);
    let addr = server.addr;

    // Before: serving, nothing in flight but the scrape itself, nothing rejected.
    let before = scrape_serving(addr);
    assert_sample(
        &before,
        "lameduck_in_flight_requests{class=\"normal\"}",
        1.0,
        "before",
    );
    assert_sample(
        &before,
        "lameduck_in_flight_requests{class=\"long_running\"}",
        0.0,
        "before",
    );
    assert_eq!(
        retry_after_rejections(&before),
        Some(0.0),
        "before\n{before}"
    );
    assert!(
        sample(&before, "lameduck_termination_budget_seconds").is_some_and(|b| b >= 61.0),
        "budget: 1 s delay + 60 s request timeout + 2 s\n{before}"
    );

    // Three normal requests and two streams in flight.

    let mut sleeps: Vec<Conn> = (0..SLEEPS)
        .map(|_| {
            let mut c = Conn::connect(addr).expect("connect");
            c.send_get(&format!("/sleep?duration={}s", SLEEP.as_secs()), &[])
                .expect("send /sleep");
            c
        })
        .collect();
    let watches: Vec<Conn> = (0..WATCHES)
        .map(|_| {
            let mut c = Conn::connect(addr).expect("connect");
            c.send_get("/watch", &[]).expect("send /watch");
            c
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    let loaded = loop {
        let body = scrape(addr, "GET /metrics with requests in flight");
        let want_normal = (SLEEPS + 1) as f64;
        if in_flight(&body, "normal") == Some(want_normal)
            && in_flight(&body, "long_running") == Some(WATCHES as f64)
        {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "in-flight gauges never showed {SLEEPS}+1 normal and {WATCHES} long-running\n{body}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_phase(&loaded, "serving", "with requests in flight");

    // During the lame-duck window.
    let _sent = server.signal("TERM");
    let deadline = Instant::now() + Duration::from_secs(2);
    let lame = loop {
        let body = scrape(addr, "GET /metrics in the lame-duck window");
        if sample(&body, "lameduck_phase{phase=\"lame_duck\"}") == Some(1.0)
            // The driver records the signal's time just after the phase changes.
            && sample(&body, "lameduck_signal_timestamp_seconds{signal=\"ShutdownInitiated\"}").is_some()
        {
            break body;
        }
        assert!(Instant::now() < deadline, "phase never lame_duck\n{body}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_sample(
        &lame,
        "lameduck_signal_fired{signal=\"ShutdownInitiated\"}",
        1.0,
        "lame duck",
    );
    assert_sample(
        &lame,
        "lameduck_signal_fired{signal=\"NotAcceptingNewRequest\"}",
        0.0,
        "lame duck",
    );
    assert_eq!(
        in_flight(&lame, "normal"),
        Some((SLEEPS + 1) as f64),
        "lame duck\n{lame}"
    );
    assert!(
        sample(
            &lame,
            "lameduck_signal_timestamp_seconds{signal=\"ShutdownInitiated\"}"
        )
        .is_some_and(|t| t > 1.0e9),
        "ShutdownInitiated has a Unix timestamp\n{lame}"
    );

    // During the drain: the gate is closed, the scrape is untracked.
    server.wait_signal(NOT_ACCEPTING, Duration::from_secs(10));
    let draining = scrape(addr, "GET /metrics during the drain");
    assert_phase(&draining, "draining", "during the drain");
    assert_eq!(
        in_flight(&draining, "normal"),
        Some(SLEEPS as f64),
        "draining\n{draining}"
    );
    assert!(
        in_flight(&draining, "long_running").is_some_and(|n| n <= WATCHES as f64),
        "draining\n{draining}"
    );
    for i in 0..REJECTED {
        assert_retry_after(
            &get(addr, "/"),
            &format!("rejected request {i} during the drain"),
        );
    }
    let rejected = scrape(addr, "GET /metrics after the rejections");
    assert_eq!(
        retry_after_rejections(&rejected),
        Some(REJECTED as f64),
        "the 429s the test caused\n{rejected}"
    );
    assert!(
        !server.signals().has(IN_FLIGHT_DRAINED),
        "the scrapes above were meant to run during the drain\n{}",
        server.describe()
    );

    // After the drain: a scrape sent now and sampled once the listener has stopped (in this
    // mode, right after the drain).
    let mut late = Conn::connect(addr).expect("connect during the drain");
    late.send_get("/metrics?after=HTTPServerStoppedListening", &[])
        .expect("send /metrics?after");
    for (i, conn) in sleeps.iter_mut().enumerate() {
        let resp = conn.read_response().expect("in-flight /sleep");
        assert_reply(&resp, 200, SLEEP_BODY, &format!("in-flight /sleep {i}"));
    }
    let resp = late.read_response().expect("the delayed scrape");
    assert_eq!(resp.status(), 200, "delayed scrape\n{resp}");
    let after = resp.text();
    // The scrape answers as the signal fires; its log line may come a moment later.
    server.wait_signal(IN_FLIGHT_DRAINED, Duration::from_secs(5));
    assert_phase(&after, "stopping", "after the drain");
    assert_eq!(
        in_flight(&after, "normal"),
        Some(0.0),
        "after the drain\n{after}"
    );
    assert_eq!(
        in_flight(&after, "long_running"),
        Some(0.0),
        "after the drain\n{after}"
    );
    assert_eq!(
        retry_after_rejections(&after),
        Some(REJECTED as f64),
        "after\n{after}"
    );
    assert_sample(
        &after,
        "lameduck_signal_fired{signal=\"InFlightRequestsDrained\"}",
        1.0,
        "after",
    );
    assert_sample(
        &after,
        "lameduck_drain_remaining_requests{class=\"normal\"}",
        0.0,
        "after",
    );
    assert!(
        sample(&after, "lameduck_drain_duration_seconds{class=\"normal\"}")
            .is_some_and(|d| d > 1.0 && d < SLEEP.as_secs_f64()),
        "the normal drain lasted from NotAcceptingNewRequest to the end of the sleeps\n{after}"
    );
    drop(watches);

    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(FLAGS);

    // The summary line counts exactly what the test sent.
    let summary = server.summary().expect("checked on exit");
    assert_eq!(summary.cause, Some(StopCause::OsSignal), "{summary}");
    assert_eq!(summary.requests_drained, SLEEPS as u64, "{summary}");
    assert_eq!(summary.requests_remaining, 0, "{summary}");
    assert_eq!(summary.streams_ended, WATCHES as u64, "{summary}");
    assert_eq!(summary.streams_remaining, 0, "{summary}");
    assert_eq!(
        summary.rejected.get(RejectionReason::RetryAfter),
        REJECTED,
        "{summary}"
    );
    assert_eq!(summary.rejected.total(), REJECTED, "{summary}");
    assert_eq!(summary.code, Some(0), "{summary}");
    let took = summary.signal_to_exit.expect("signal_to_exit");
    assert!(took >= Duration::from_secs(2), "{summary}");
    assert!(
        summary
            .lame_duck
            .is_some_and(|d| d >= Duration::from_secs(1)),
        "{summary}"
    );
}

/// Close-listener mode: `/metrics` cannot be reached once the listener closes, so this reads
/// it before and during the lame-duck window; the summary counts the request that drained.
pub fn metrics_and_summary_in_close_listener_mode(bin: &'static str) {
    let flags = &["--shutdown-delay", "500ms"];
    let mut server = ServerProcess::start(bin, flags);
    let addr = server.addr;
    scrape_serving(addr);
    let mut sleep = Conn::connect(addr).expect("connect");
    sleep
        .send_get("/sleep?duration=2s", &[])
        .expect("send /sleep");
    let deadline = Instant::now() + Duration::from_secs(5);
    while in_flight(&scrape(addr, "scrape"), "normal") != Some(2.0) {
        assert!(
            Instant::now() < deadline,
            "the /sleep never showed in flight"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server.signal("TERM");
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let body = scrape(addr, "GET /metrics in the lame-duck window");
        if sample(&body, "lameduck_phase{phase=\"lame_duck\"}") == Some(1.0) {
            assert_eq!(in_flight(&body, "normal"), Some(2.0), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "phase never lame_duck\n{body}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let resp = sleep.read_response().expect("in-flight /sleep");
    assert_reply(&resp, 200, SLEEP_BODY, "in-flight /sleep");
    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(flags);
    let summary = server.summary().expect("checked on exit");
    assert_eq!(summary.requests_drained, 1, "{summary}");
    assert_eq!(summary.streams_ended, 0, "{summary}");
    assert_eq!(summary.rejected.total(), 0, "{summary}");
    assert_eq!(summary.code, Some(0), "{summary}");
}
