//! Server-Sent Events at shutdown: `/events` streams keep their events coming through the
//! shutdown delay and until their turn in the paced long-running drain, then send a last
//! `retry:` event (the `Retry-After` of the server's mode, in milliseconds) and end with the
//! terminating chunk, so that an EventSource reconnects elsewhere no sooner than a rejected
//! request would.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::*;

const STREAMS: usize = 20;
/// Each stream's reader gives up this long after it started.
const READ_DEADLINE: Duration = Duration::from_secs(30);

/// What one stream received.
#[derive(Debug)]
struct Received {
    /// The events, each with the instant its chunk was read.
    events: Vec<(Instant, String)>,
    /// The terminating chunk's instant.
    ended: Instant,
}

fn read_stream(
    addr: std::net::SocketAddr,
    i: usize,
    opened: mpsc::Sender<Result<(), String>>,
) -> Result<Received, String> {
    let started = Instant::now();
    let head = Conn::connect(addr).and_then(|mut conn| {
        conn.send_get("/events", &["Accept: text/event-stream"])?;
        let head = conn.read_head()?;
        Ok((conn, head))
    });
    let (mut conn, head) = match head {
        Ok(ok) => ok,
        Err(e) => {
            let e = format!("stream {i}: {e}");
            let _ = opened.send(Err(e.clone()));
            return Err(e);
        }
    };
    let content_type = head.header("content-type").unwrap_or("");
    if head.status != 200 || !head.is_chunked() || !content_type.starts_with("text/event-stream") {
        let e = format!("stream {i}: not a 200 chunked event stream: {head:?}");
        let _ = opened.send(Err(e.clone()));
        return Err(e);
    }
    let _ = opened.send(Ok(()));
    let mut events = Vec::new();
    let mut pending = String::new();
    loop {
        match conn.read_chunk() {
            Ok(Some(chunk)) => {
                let at = Instant::now();
                pending.push_str(&String::from_utf8_lossy(&chunk));
                // Whole events only: a chunk may hold several, or part of one.
                while let Some(end) = pending.find("\n\n") {
                    events.push((at, pending[..end].to_string()));
                    pending.drain(..end + 2);
                }
            }
            Ok(None) => {
                if !pending.is_empty() {
                    return Err(format!("stream {i}: ended inside an event: {pending:?}"));
                }
                return Ok(Received {
                    events,
                    ended: Instant::now(),
                });
            }
            Err(e) => {
                return Err(format!(
                    "stream {i}: ended without its terminating chunk after {} events: {e}",
                    events.len()
                ))
            }
        }
        if started.elapsed() > READ_DEADLINE {
            return Err(format!(
                "stream {i}: still streaming after {READ_DEADLINE:?}"
            ));
        }
    }
}

fn event_streams_end_at_their_turn(bin: &'static str, extra: &[&str], retry_ms: u64) {
    let mut flags = vec![
        "--shutdown-delay",
        "500ms",
        "--shutdown-watch-termination-grace-period",
        "5s",
    ];
    flags.extend_from_slice(extra);
    let mut server = ServerProcess::start(bin, &flags);
    let addr = server.addr;
    let (opened_tx, opened_rx) = mpsc::channel();
    let threads: Vec<_> = (0..STREAMS)
        .map(|i| {
            let opened = opened_tx.clone();
            std::thread::Builder::new()
                .name(format!("events-{i}"))
                .stack_size(128 * 1024)
                .spawn(move || read_stream(addr, i, opened))
                .expect("spawn a reader")
        })
        .collect();
    drop(opened_tx);
    let opened_by = Instant::now() + Duration::from_secs(20);
    for n in 0..STREAMS {
        let left = opened_by.saturating_duration_since(Instant::now());
        match opened_rx.recv_timeout(left) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{e}\n{}", server.describe()),
            Err(e) => panic!(
                "only {n} of {STREAMS} streams open: {e}\n{}",
                server.describe()
            ),
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let sent = server.signal("TERM");
    let mut received = Vec::new();
    for thread in threads {
        match thread.join() {
            Ok(Ok(r)) => received.push(r),
            Ok(Err(e)) => panic!("{e}\n{}", server.describe()),
            Err(_) => panic!("a reader panicked\n{}", server.describe()),
        }
    }
    server.assert_exit(0, Duration::from_secs(15));
    let retry = format!("retry: {retry_ms}");
    for (i, r) in received.iter().enumerate() {
        let (last_at, last) = r.events.last().expect("at least the retry event");
        assert_eq!(last, &retry, "stream {i}: the last event: {:?}", r.events);
        let retries = r
            .events
            .iter()
            .filter(|(_, e)| e.starts_with("retry:"))
            .count();
        assert_eq!(retries, 1, "stream {i}: one retry event: {:?}", r.events);
        // Events kept coming through the 500 ms shutdown delay: about 5, at least 3.
        let after_signal = r
            .events
            .iter()
            .filter(|(at, e)| *at > sent.after && e.contains("data: event "))
            .count();
        assert!(
            after_signal >= 3,
            "stream {i}: {after_signal} events after the signal (want the delay's ~5): {:?}",
            r.events
        );
        // The retry event came at the end, within the grace period.
        let end = r.ended.duration_since(sent.before);
        assert!(
            last_at.duration_since(sent.before) >= Duration::from_millis(450)
                && end <= Duration::from_millis(500) + Duration::from_secs(5 + 2),
            "stream {i}: retry at {:?}, ended at {end:?} after the signal",
            last_at.duration_since(sent.before)
        );
        for (_, event) in &r.events {
            assert!(
                event.starts_with("id: ") || event.starts_with("retry: "),
                "stream {i}: an event that is not the route's: {event:?}"
            );
        }
    }
    let summary = server.stderr_text();
    assert!(
        summary.contains(&format!("streams_ended={STREAMS} streams_remaining=0")),
        "the summary counts the streams as ended\n{}",
        server.describe()
    );
}

/// Close-listener mode: the hint is the 503's `Retry-After: 1`, 1000 ms.
pub fn event_streams_end_with_a_retry_hint(bin: &'static str) {
    event_streams_end_at_their_turn(bin, &[], 1000);
}

/// Retry-after mode: the hint is the 429's `Retry-After: 5`, 5000 ms.
pub fn event_streams_end_with_a_retry_hint_retry_after_mode(bin: &'static str) {
    event_streams_end_at_their_turn(bin, &["--shutdown-send-retry-after"], 5000);
}
