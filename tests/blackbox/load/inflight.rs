//! 1,000 concurrent in-flight `/sleep?duration=2s` requests at SIGTERM: every one completes
//! with 200 (no reset, no 503/429), in both modes, and the process exits 0 after them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::client::{self, Failure};
use crate::support::h2::runtime;
use crate::support::*;

const REQUESTS: usize = 1000;
const SLEEP: Duration = Duration::from_secs(2);

pub fn inflight_1000_sleeps_close_listener_mode(bin: &'static str) {
    inflight_sleeps(bin, &["--shutdown-delay", "1s"]);
}

pub fn inflight_1000_sleeps_retry_after_mode(bin: &'static str) {
    inflight_sleeps(
        bin,
        &["--shutdown-delay", "1s", "--shutdown-send-retry-after"],
    );
}

fn inflight_sleeps(bin: &'static str, flags: &[&str]) {
    client::require_open_files(REQUESTS as u64);
    let mut server = ServerProcess::start(bin, flags);
    let addr = server.addr;
    assert_reply(&get(addr, "/readyz"), 200, "ok", "before the load");

    // Connect all first (connects are what is slow on a busy machine), then write every
    // request at once, so that all of them are in flight when the signal comes.
    let rt = runtime();
    let permits = Arc::new(Semaphore::new(64));
    let connected = Arc::new(AtomicUsize::new(0));
    let sent = Arc::new(AtomicUsize::new(0));
    let (go_tx, go_rx) = tokio::sync::watch::channel(false);
    let tasks: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let permits = Arc::clone(&permits);
            let connected = Arc::clone(&connected);
            let sent = Arc::clone(&sent);
            let mut go = go_rx.clone();
            rt.spawn(async move {
                let mut pending = client::connect(addr, &permits).await?;
                connected.fetch_add(1, Ordering::SeqCst);
                let _ = go.wait_for(|go| *go).await;
                pending.write_get("/sleep?duration=2s").await?;
                sent.fetch_add(1, Ordering::SeqCst);
                pending.read_reply(Duration::from_secs(30)).await
            })
        })
        .collect();
    wait_count(&connected, "connected", Duration::from_secs(60), &server);
    let started = Instant::now();
    go_tx.send_replace(true);
    wait_count(&sent, "sent", Duration::from_secs(20), &server);
    let all_sent = started.elapsed();
    // A moment for the server to read them all.
    std::thread::sleep(Duration::from_millis(300));
    let signal = server.signal("TERM");

    let mut ok = 0;
    let mut before_signal = 0;
    let mut failures: Vec<Failure> = Vec::new();
    let mut last_end = signal.after;
    for task in tasks {
        match rt.block_on(task).expect("client task panicked") {
            Ok(reply) if reply.head.status == 200 && reply.body == SLEEP_BODY.as_bytes() => {
                ok += 1;
                if reply.ended_at < signal.before {
                    before_signal += 1;
                }
                last_end = last_end.max(reply.ended_at);
            }
            Ok(reply) => failures.push(Failure {
                kind: std::io::ErrorKind::Other,
                message: format!(
                    "{} {:?}",
                    reply.head.status,
                    String::from_utf8_lossy(&reply.body)
                ),
            }),
            Err(f) => failures.push(f),
        }
    }
    drop(rt);
    let code = server.expect_exit(Duration::from_secs(30));
    let exited = Instant::now();
    let log = server.signals();
    let drain_line = log_line_containing(&server.stderr_text(), "draining in-flight requests");
    let summary = format!(
        "{ok}/{REQUESTS} ok, all written within {all_sent:?}, {before_signal} done \
         before SIGTERM, last reply {:?} after SIGTERM, exit {code} {:?} after SIGTERM; \
         server at NotAcceptingNewRequest: {drain_line}",
        last_end.duration_since(signal.before),
        exited.duration_since(signal.before),
    );
    eprintln!("{bin} {flags:?}: {summary}");
    assert!(
        failures.is_empty(),
        "{} of {REQUESTS} in-flight requests failed: {}\n{summary}\n{}",
        failures.len(),
        client::summarize(&failures),
        log.render()
    );
    assert_eq!(
        before_signal, 0,
        "requests meant to be in flight at SIGTERM completed before it (a slow start under CPU \
         contention?): {summary}"
    );
    assert_eq!(code, 0, "exit code: {summary}\n{}", server.describe());
    assert!(
        last_end.duration_since(signal.before) <= SLEEP + Duration::from_secs(10),
        "replies came late: {summary}"
    );
    server.assert_trace_legal(flags);
}

/// The text of the first log line containing `needle` (after the level and target).
pub fn log_line_containing(log: &str, needle: &str) -> String {
    log.lines()
        .find(|l| l.contains(needle))
        .map(|l| {
            l.split("[graceful-termination]")
                .last()
                .unwrap_or(l)
                .trim()
                .to_string()
        })
        .unwrap_or_else(|| format!("(no line with {needle:?})"))
}

/// Waits until `count` reaches [`REQUESTS`].
#[track_caller]
fn wait_count(count: &AtomicUsize, what: &str, within: Duration, server: &ServerProcess) {
    let deadline = Instant::now() + within;
    while count.load(Ordering::SeqCst) < REQUESTS {
        assert!(
            Instant::now() < deadline,
            "only {} of {REQUESTS} requests {what} within {within:?}\n{}",
            count.load(Ordering::SeqCst),
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
