//! A normal streamed response is aborted at the request timeout, over HTTP/1.1 and HTTP/2,
//! while serving and in the drain.

use std::io;
use std::time::{Duration, Instant};

use super::poll_exit;
use crate::support::h2::{runtime, H2Conn, H2End};
use crate::support::*;

/// Whether an I/O error means the server aborted the response (closed or reset the
/// connection), as opposed to the client giving up waiting.
fn is_abort(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// Reads the rest of a chunked body that must be aborted by the server. Returns when the
/// body was cut: the moment and the number of further chunks; panics if it ended cleanly or
/// the read timed out.
fn read_until_aborted(conn: &mut Conn, what: &str, server: &ServerProcess) -> (Instant, usize) {
    let mut chunks = 0;
    // /stream?duration=5s sends 50 lines: more reads than that is a runaway stream.
    for _ in 0..200 {
        match conn.read_chunk() {
            Ok(Some(_)) => chunks += 1,
            Ok(None) => panic!(
                "{what}: the body ended cleanly (terminating chunk) after {chunks} more \
                 chunks; it should have been aborted at the request timeout\n{}",
                server.describe()
            ),
            Err(e) if is_abort(&e) => return (Instant::now(), chunks),
            Err(e) => panic!(
                "{what}: neither aborted nor ended after {chunks} more chunks: {e}\n{}",
                server.describe()
            ),
        }
    }
    panic!("{what}: more than 200 chunks\n{}", server.describe());
}

/// Sends `GET path` on a new connection and reads the head and the first chunk of a chunked
/// 200. Returns the connection, when the request was sent and when the first chunk arrived.
fn open_stream(addr: std::net::SocketAddr, path: &str, what: &str) -> (Conn, Instant, Instant) {
    let mut conn = Conn::connect(addr).unwrap_or_else(|e| panic!("{what}: connect: {e}"));
    conn.set_read_timeout(Duration::from_secs(8))
        .expect("read timeout");
    let sent = Instant::now();
    conn.send_get(path, &[])
        .unwrap_or_else(|e| panic!("{what}: send: {e}"));
    let head = conn
        .read_head()
        .unwrap_or_else(|e| panic!("{what}: head: {e}"));
    assert!(
        head.status == 200 && head.is_chunked(),
        "{what}: expected a chunked 200, got {head:?}"
    );
    let first = conn
        .read_chunk()
        .unwrap_or_else(|e| panic!("{what}: first chunk: {e}"));
    let first_at = Instant::now();
    assert_eq!(
        first.as_deref(),
        Some(&b"line 0\n"[..]),
        "{what}: the first chunk"
    );
    (conn, sent, first_at)
}

const STREAM_FLAGS: &[&str] = &["--request-timeout", "1s"];

const STREAM_PATH: &str = "/stream?duration=5s";

/// When the abort may come, after the request was sent (the request timeout is 1 s).
const ABORT_WINDOW: (Duration, Duration) =
    (Duration::from_millis(800), Duration::from_millis(2500));
/// "At once": the head and first chunk come this soon after the request.
const FIRST_CHUNK_WITHIN: Duration = Duration::from_millis(500);

/// `GET /stream?duration=5s` with `--request-timeout 1s` (a normal request, its head sent at
/// once): the response is aborted at about 1 s, over HTTP/1.1 (connection closed without the
/// terminating chunk) and HTTP/2 (the stream never ends cleanly); and in a drain, the same
/// abort ends the drain and the process exits 0 long before the 5 s stream would have.
pub fn stream_is_aborted_at_the_request_timeout(bin: &'static str) {
    let mut server = ServerProcess::start(bin, STREAM_FLAGS);
    let addr = server.addr;

    // The route itself: 400 with the parse error on a bad or missing duration; a short
    // stream ends cleanly.
    for path in ["/stream?duration=bogus", "/stream"] {
        let resp = get(addr, path);
        assert_eq!(resp.status(), 400, "GET {path}\n{resp}");
        assert!(
            resp.text().contains("duration"),
            "GET {path}: the 400 body should carry the parse error\n{resp}"
        );
    }
    let short = get(addr, "/stream?duration=250ms");
    assert_eq!(short.status(), 200, "GET /stream?duration=250ms\n{short}");
    assert!(
        short.head.is_chunked() && short.text() == "line 0\nline 1\nline 2\n",
        "GET /stream?duration=250ms: three lines, then the terminating chunk\n{short}"
    );

    // HTTP/1.1 while serving.
    let what = "HTTP/1.1 /stream?duration=5s while serving";
    let (mut conn, sent, first_at) = open_stream(addr, STREAM_PATH, what);
    let first = first_at.duration_since(sent);
    assert!(
        first < FIRST_CHUNK_WITHIN,
        "{what}: head and first chunk should come at once, came after {first:?}"
    );
    let (aborted_at, chunks) = read_until_aborted(&mut conn, what, &server);
    let after = aborted_at.duration_since(sent);
    eprintln!(
        "{bin} {what}: first chunk {first:?}, aborted after {after:?} and {chunks} more chunks"
    );
    assert!(
        (ABORT_WINDOW.0..=ABORT_WINDOW.1).contains(&after),
        "{what}: aborted {after:?} after the request, want {ABORT_WINDOW:?} (request timeout 1 s)"
    );

    // HTTP/2 (h2c, prior knowledge) while serving: RST_STREAM, never END_STREAM.
    let what = "HTTP/2 /stream?duration=5s while serving";
    let (sent, stream, resets, eof) = runtime().block_on(async {
        let mut h2 = H2Conn::connect(addr).await;
        let sent = Instant::now();
        let task = h2
            .start_get_streaming(STREAM_PATH, Duration::from_secs(8))
            .await;
        let stream = task
            .await
            .unwrap_or_else(|e| Err(format!("task: {e}")))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        (sent, stream, h2.resets(), h2.eof_at())
    });
    let first = stream
        .data
        .first()
        .map(|(at, bytes)| (at.duration_since(sent), bytes.clone()));
    let ms = |at: Instant| at.saturating_duration_since(sent);
    let timeline = format!(
        "status {}, head {:?}, first data {first:?}, {} data frames, end {:?}, RST_STREAM \
         (stream, code, after) {:?}, connection EOF {:?}",
        stream.status,
        ms(stream.head_at),
        stream.data.len(),
        match &stream.end {
            H2End::Clean(at) => format!("clean END_STREAM after {:?}", ms(*at)),
            H2End::Failed(at, e) => format!("failed after {:?}: {e}", ms(*at)),
            H2End::TimedOut => "still streaming after 8 s".into(),
        },
        resets
            .iter()
            .map(|r| (r.stream_id, r.error_code, ms(r.at)))
            .collect::<Vec<_>>(),
        eof.map(ms),
    );
    eprintln!("{bin} {what}: {timeline}");
    assert_eq!(stream.status, 200, "{what}: {timeline}");
    assert!(
        first.as_ref().is_some_and(
            |(after, bytes)| *after < FIRST_CHUNK_WITHIN && bytes.starts_with(b"line 0\n")
        ),
        "{what}: head and first line should come at once: {timeline}"
    );
    match &stream.end {
        H2End::Failed(at, _) => {
            let after = ms(*at);
            assert!(
                (ABORT_WINDOW.0..=ABORT_WINDOW.1).contains(&after),
                "{what}: reset {after:?} after the request, want {ABORT_WINDOW:?}: {timeline}"
            );
            assert!(
                !resets.is_empty() || eof.is_some(),
                "{what}: the stream failed without RST_STREAM or the connection closing: \
                 {timeline}"
            );
        }
        _ => panic!(
            "{what}: must be reset at the request timeout: {timeline}\n{}",
            server.describe()
        ),
    }

    // In a drain (no shutdown delay): the stream in flight at SIGTERM is aborted at its
    // request timeout, which ends the drain.
    let what = "HTTP/1.1 /stream?duration=5s in flight at SIGTERM";
    let (mut conn, sent, _) = open_stream(addr, STREAM_PATH, what);
    let signal = server.signal("TERM");
    let (aborted_at, chunks) = read_until_aborted(&mut conn, what, &server);
    let after = aborted_at.duration_since(sent);
    let exit = poll_exit(
        &mut server,
        signal.after + Duration::from_millis(3500),
        Duration::from_millis(5),
    );
    let timeline = format!(
        "aborted {after:?} after the request ({chunks} more chunks), SIGTERM {:?} after the \
         request, exit {:?} {:?} after SIGTERM",
        signal.before.saturating_duration_since(sent),
        exit.map(|(code, _)| code),
        exit.map(|(_, at)| at.saturating_duration_since(signal.before)),
    );
    eprintln!("{bin} {what}: {timeline}");
    assert!(
        (ABORT_WINDOW.0..=ABORT_WINDOW.1).contains(&after),
        "{what}: aborted {after:?} after the request, want {ABORT_WINDOW:?}: {timeline}"
    );
    match exit {
        Some((0, _)) => {}
        Some((code, _)) => panic!(
            "{what}: exit {code}, want 0: {timeline}\n{}",
            server.describe()
        ),
        None => panic!(
            "{what}: still running 3.5 s after SIGTERM (the 5 s stream must not hold the \
             drain past its 1 s request timeout): {timeline}\n{}",
            server.describe()
        ),
    }
    server.signals().assert_common_dag_order();
    server.assert_trace_legal(STREAM_FLAGS);
}
