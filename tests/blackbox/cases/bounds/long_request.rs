//! A long normal request within the request timeout survives the drain.

use std::time::{Duration, Instant};

use super::get_in_thread;
use crate::support::*;

const LONG_FLAGS: &[&str] = &["--request-timeout", "60s"];

const LONG_SLEEP: Duration = Duration::from_secs(45);

/// `GET /sleep?duration=45s` with `--request-timeout 60s`, in flight at SIGTERM: the drain
/// waits for it (no shorter bound cuts it), the reply is a complete 200 after ~45 s, and the
/// process exits 0 only after it. Takes about 46 s.
pub fn long_request_survives_the_drain(bin: &'static str) {
    let mut server = ServerProcess::start(bin, LONG_FLAGS);
    let addr = server.addr;
    // The reader: bounded by its read timeout (60 s).
    let (sent, reader) = get_in_thread(
        addr,
        "/sleep?duration=45s",
        LONG_SLEEP + Duration::from_secs(15),
        "long-sleep",
    );
    std::thread::sleep(Duration::from_millis(300));
    let signal = server.signal("TERM");
    server.wait_signal(NOT_ACCEPTING, Duration::from_secs(5));

    // While the request is in flight: the process runs, the drain is not over.
    let give_up = sent + LONG_SLEEP + Duration::from_secs(20);
    let mut early = None;
    while !reader.is_finished() && Instant::now() < give_up {
        let elapsed = sent.elapsed();
        if elapsed + Duration::from_millis(500) < LONG_SLEEP && early.is_none() {
            if let Some(status) = server.wait_exit(Duration::ZERO) {
                early = Some(format!(
                    "the process exited ({status}) {elapsed:?} after the request was sent"
                ));
            } else if server.signals().has(IN_FLIGHT_DRAINED) {
                early = Some(format!(
                    "InFlightRequestsDrained logged {elapsed:?} after the request was sent"
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        reader.is_finished(),
        "no reply {:?} after sending /sleep?duration=45s\n{}",
        sent.elapsed(),
        server.describe()
    );
    let (resp, resp_at) = reader.join().expect("reader thread");
    let took = resp_at.duration_since(sent);
    let resp = resp.unwrap_or_else(|e| {
        panic!(
            "in-flight /sleep?duration=45s across the drain: {e} after {took:?} ({})\n{}",
            early
                .as_deref()
                .unwrap_or("the process was running until then"),
            server.describe()
        )
    });
    eprintln!(
        "{bin} long request: {} after {took:?} (SIGTERM {:?} after the request)",
        resp.status(),
        signal.before.saturating_duration_since(sent)
    );
    assert_reply(&resp, 200, SLEEP_BODY, "in-flight /sleep?duration=45s");
    assert!(
        took + Duration::from_millis(100) >= LONG_SLEEP,
        "the reply came after {took:?}, before the {LONG_SLEEP:?} sleep ended"
    );
    assert!(
        early.is_none(),
        "the drain ended before the in-flight request: {}\n{}",
        early.unwrap_or_default(),
        server.describe()
    );
    server.assert_exit(0, Duration::from_secs(10));
    let log = server.signals();
    log.assert_common_dag_order();
    server.assert_trace_legal(LONG_FLAGS);
}
