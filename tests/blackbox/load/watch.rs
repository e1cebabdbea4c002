//! 2,000 open `/watch` streams with a 5 s grace: every stream ends cleanly (terminating
//! chunk), the ends are paced at `max(2000 / 5 s, 200) = 400/s`, and all within the grace.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::client::{self, Failure};
use super::inflight::log_line_containing;
use crate::support::h2::runtime;
use crate::support::*;

const STREAMS: usize = 2000;
const GRACE: Duration = Duration::from_secs(5);
const FLAGS: &[&str] = &["--shutdown-watch-termination-grace-period", "5s"];
/// 2,000 ends at 400/s take about 5 s; unpaced they would take milliseconds.
const MIN_SPREAD: Duration = Duration::from_secs(3);
/// At 400/s about 40 ends fall in any 100 ms; allow bunching under CPU contention.
const MAX_PER_100MS: usize = 400;
/// After the grace: the last end must come within the grace plus this.
const SLACK: Duration = Duration::from_secs(2);

pub fn watch_2000_streams_drain_paced(bin: &'static str) {
    client::require_open_files(STREAMS as u64);
    let mut server = ServerProcess::start(bin, FLAGS);
    let addr = server.addr;
    let rt = runtime();
    let permits = Arc::new(Semaphore::new(64));
    let open = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..STREAMS)
        .map(|_| {
            let permits = Arc::clone(&permits);
            let open = Arc::clone(&open);
            rt.spawn(async move {
                let mut pending = client::send_get(addr, "/watch", &permits).await?;
                let head = tokio::time::timeout(Duration::from_secs(20), pending.read_head())
                    .await
                    .map_err(|_| Failure {
                        kind: std::io::ErrorKind::TimedOut,
                        message: "no reply head within 20 s".into(),
                    })??;
                if head.status != 200 || !head.is_chunked() {
                    return Err(Failure {
                        kind: std::io::ErrorKind::Other,
                        message: format!("not a 200 chunked stream: {head:?}"),
                    });
                }
                open.fetch_add(1, Ordering::SeqCst);
                let read = pending.read_body(head);
                match tokio::time::timeout(Duration::from_secs(60), read).await {
                    Ok(r) => r.map_err(Failure::from),
                    Err(_) => Err(Failure {
                        kind: std::io::ErrorKind::TimedOut,
                        message: "still streaming 60 s later".into(),
                    }),
                }
            })
        })
        .collect();

    let deadline = Instant::now() + Duration::from_secs(40);
    while open.load(Ordering::SeqCst) < STREAMS {
        if tasks.iter().any(|t| t.is_finished()) || Instant::now() >= deadline {
            let failed: Vec<String> = tasks
                .into_iter()
                .filter(|t| t.is_finished())
                .take(5)
                .map(|t| match rt.block_on(t) {
                    Ok(Err(f)) => f.to_string(),
                    other => format!("{other:?}"),
                })
                .collect();
            panic!(
                "only {} of {STREAMS} watches open (ended early: {failed:?})\n{}",
                open.load(Ordering::SeqCst),
                server.describe()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Let the server count them all as in flight.
    std::thread::sleep(Duration::from_millis(500));

    let signal = server.signal("TERM");
    let mut ends = Vec::with_capacity(STREAMS);
    let mut failures = Vec::new();
    let mut chunks = (usize::MAX, 0);
    for task in tasks {
        match rt.block_on(task).expect("watch task panicked") {
            Ok(reply) => {
                chunks = (chunks.0.min(reply.chunks), chunks.1.max(reply.chunks));
                ends.push(reply.ended_at);
            }
            Err(f) => failures.push(f),
        }
    }
    drop(rt);
    let code = server.expect_exit(Duration::from_secs(30));
    let drain_line = log_line_containing(&server.stderr_text(), "draining in-flight requests");

    ends.sort();
    let (first, last) = match (ends.first(), ends.last()) {
        (Some(f), Some(l)) => (
            f.saturating_duration_since(signal.before),
            l.saturating_duration_since(signal.before),
        ),
        _ => (Duration::ZERO, Duration::ZERO),
    };
    let spread = last.saturating_sub(first);
    let max_per_100ms = (0..ends.len())
        .map(|i| {
            ends[i..]
                .iter()
                .take_while(|t| t.duration_since(ends[i]) < Duration::from_millis(100))
                .count()
        })
        .max()
        .unwrap_or(0);
    let summary = format!(
        "{} of {STREAMS} ended cleanly; first end {first:?}, last end {last:?} after SIGTERM, \
         spread {spread:?}, at most {max_per_100ms} ends in 100 ms, chunks per stream \
         {}..={}, exit {code}; server: {drain_line}",
        ends.len(),
        chunks.0,
        chunks.1,
    );
    eprintln!("{bin}: {summary}");
    assert!(
        failures.is_empty(),
        "{} of {STREAMS} watches did not end cleanly: {}\n{summary}\n{}",
        failures.len(),
        client::summarize(&failures),
        server.signals().render()
    );
    assert_eq!(code, 0, "exit code: {summary}");
    assert!(
        last <= GRACE + SLACK,
        "watches must end within the {GRACE:?} grace (+{SLACK:?}): {summary}"
    );
    assert!(
        spread >= MIN_SPREAD,
        "ends not paced (2,000 at 400/s take ~5 s; want ≥ {MIN_SPREAD:?}): {summary}"
    );
    assert!(
        max_per_100ms <= MAX_PER_100MS,
        "more than {MAX_PER_100MS} ends within 100 ms: not paced: {summary}"
    );
    server.assert_trace_legal(FLAGS);
}
