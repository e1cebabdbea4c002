//! The harness: building and running example servers, a raw HTTP/1.1 client, log reading,
//! the trace check of every run against the core's reference model, and the assertions
//! several cases share.

pub mod build;
pub mod grpc;
pub mod h2;
pub mod h2tap;
pub mod http1;
pub mod log;
pub mod process;
pub mod tls;
pub mod trace;

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub use http1::{get, try_get, Conn, IdleState, Response};
pub use log::*;
pub use process::{ensure_open_files, ServerProcess, SignalSent, STARTUP_TIMEOUT};
pub use trace::TraceCheck;

/// The health bodies of `docs/design.md#health`.
pub const READYZ_VERBOSE_OK: &str = "[+]ping ok\n[+]shutdown ok\nreadyz check passed\n";
pub const READYZ_SHUTTING_DOWN: &str =
    "[+]ping ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n";
pub const READYZ_SHUTDOWN_CHECK_FAILED: &str = "internal server error: process is shutting down\n";
pub const READYZ_EXCLUDED_SHUTDOWN: &str =
    "[+]ping ok\n[+]shutdown excluded: ok\nreadyz check passed\n";
pub const LIVEZ_VERBOSE_OK: &str = "[+]ping ok\nlivez check passed\n";
pub const HEALTHZ_VERBOSE_OK: &str = "[+]ping ok\nhealthz check passed\n";
pub const RETRY_AFTER_BODY: &str = "The apiserver is shutting down, please try again later.\n";
pub const SLEEP_BODY: &str = "Welcome HTTP Server";

/// How soon `/readyz` must turn 500 after the signal (`docs/design.md#client-view`: 300 ms).
pub const READYZ_RED_WITHIN: Duration = Duration::from_millis(300);

/// Asserts `status` and exact `body`.
#[track_caller]
pub fn assert_reply(resp: &Response, status: u16, body: &str, what: &str) {
    assert!(
        resp.status() == status && resp.body == body.as_bytes(),
        "{what}: expected {status} {body:?}, got\n{resp}"
    );
}

/// Asserts the two health headers of `docs/design.md#health`.
#[track_caller]
pub fn assert_health_headers(resp: &Response, what: &str) {
    assert_eq!(
        resp.header("content-type"),
        Some("text/plain; charset=utf-8"),
        "{what}: Content-Type\n{resp}"
    );
    assert_eq!(
        resp.header("x-content-type-options"),
        Some("nosniff"),
        "{what}: X-Content-Type-Options\n{resp}"
    );
}

/// A health reply: status, exact body and both headers.
#[track_caller]
pub fn assert_health(addr: SocketAddr, path: &str, status: u16, body: &str, phase: &str) {
    let resp = get(addr, path);
    let what = format!("{phase}: GET {path}");
    assert_reply(&resp, status, body, &what);
    assert_health_headers(&resp, &what);
}

/// Asserts the retry-after mode rejection: 429, `Retry-After: 5`, `Connection: close`, the text
/// body.
#[track_caller]
pub fn assert_retry_after(resp: &Response, what: &str) {
    assert_eq!(resp.status(), 429, "{what}: status\n{resp}");
    assert_eq!(
        resp.header("retry-after"),
        Some("5"),
        "{what}: Retry-After\n{resp}"
    );
    assert!(
        resp.head.connection_close(),
        "{what}: Connection: close\n{resp}"
    );
    assert_eq!(resp.text(), RETRY_AFTER_BODY, "{what}: body\n{resp}");
}

/// Polls `/readyz` on new connections every 20 ms from `sent.after` and asserts the first
/// 500 arrives within [`READYZ_RED_WITHIN`], with the shutting-down body. Returns when seen.
#[track_caller]
pub fn assert_readyz_turns_red(server: &ServerProcess, sent: SignalSent) -> Duration {
    let deadline = sent.after + Duration::from_secs(3);
    let mut seen = Vec::new();
    loop {
        match try_get(server.addr, "/readyz") {
            Ok(resp) if resp.status() == 500 => {
                let elapsed = sent.after.elapsed();
                assert_reply(&resp, 500, READYZ_SHUTTING_DOWN, "/readyz after the signal");
                assert_health_headers(&resp, "/readyz after the signal");
                assert!(
                    elapsed <= READYZ_RED_WITHIN,
                    "/readyz first answered 500 {elapsed:?} after `kill` returned \
                     (limit {READYZ_RED_WITHIN:?}); earlier polls: {seen:?}"
                );
                return elapsed;
            }
            Ok(resp) => {
                assert_eq!(resp.status(), 200, "/readyz before turning red\n{resp}");
                seen.push(format!("{:?}: 200", sent.after.elapsed()));
            }
            Err(e) => panic!(
                "/readyz after the signal: {e} (polls so far: {seen:?})\n{}",
                server.describe()
            ),
        }
        assert!(
            Instant::now() < deadline,
            "/readyz still 200 3 s after the signal; polls: {seen:?}\n{}",
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to `within` until new connections are refused (ECONNREFUSED), then checks that
/// the next few connects are refused too. Connects that still succeed in between are allowed
/// (the listener may close a moment after the log line) and get any answer; so is a connect
/// reset as it completes (ECONNRESET: the handshake finished in the listener's backlog, and the
/// kernel resets what the backlog holds when the listener closes).
#[track_caller]
pub fn assert_refused_soon(server: &ServerProcess, within: Duration) {
    let deadline = Instant::now() + within;
    let mut accepted = Vec::new();
    loop {
        match Conn::connect(server.addr) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                accepted.push(Err(e.kind()));
            }
            Err(e) => panic!("connect after the listener should close: {e}"),
            Ok(mut conn) => {
                let _ = conn.set_read_timeout(Duration::from_secs(2));
                let answer = conn.get("/").map(|r| r.status()).map_err(|e| e.kind());
                accepted.push(answer);
            }
        }
        assert!(
            Instant::now() < deadline,
            "new connections still accepted {within:?} after the listener should have \
             closed; answers: {accepted:?}\n{}",
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..3 {
        let r = Conn::connect(server.addr).map(|_| ());
        assert!(
            matches!(&r, Err(e) if e.kind() == io::ErrorKind::ConnectionRefused),
            "a connect after a refused one was not refused: {r:?}"
        );
    }
}

/// Sleeps until `at` (or not at all if it has passed).
pub fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}
