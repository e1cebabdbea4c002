//! The example routes: `/`, `/sleep`, its 400 on a bad duration and 504 at `--request-timeout`,
//! `/bytes` and its 400 on a bad size.

use std::time::{Duration, Instant};

use crate::support::*;

pub fn request_timeout_gives_504(bin: &'static str) {
    let mut server = ServerProcess::start(bin, &["--request-timeout", "1s"]);
    let addr = server.addr;
    assert_reply(
        &get(addr, "/sleep?duration=100ms"),
        200,
        SLEEP_BODY,
        "/sleep shorter than the request timeout",
    );
    let start = Instant::now();
    let resp = get(addr, "/sleep?duration=3s");
    let took = start.elapsed();
    assert_eq!(
        resp.status(),
        504,
        "/sleep?duration=3s with --request-timeout 1s\n{resp}"
    );
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(2900),
        "504 should come at the 1 s request timeout, came after {took:?}"
    );
    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(10));
    server.assert_trace_legal(&["--request-timeout", "1s"]);
}

pub fn bad_sleep_duration_gives_400(bin: &'static str) {
    let mut server = ServerProcess::start(bin, &[]);
    let addr = server.addr;
    assert_reply(&get(addr, "/"), 200, "ok", "GET /");
    assert_reply(
        &get(addr, "/sleep?duration=10ms"),
        200,
        SLEEP_BODY,
        "GET /sleep?duration=10ms",
    );
    let resp = get(addr, "/sleep?duration=bogus");
    assert_eq!(resp.status(), 400, "/sleep?duration=bogus\n{resp}");
    let body = resp.text().to_ascii_lowercase();
    assert!(
        body.contains("bogus") || body.contains("duration"),
        "the 400 body should carry the parse error\n{resp}"
    );
    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(10));
    server.assert_trace_legal(&[]);
}

pub fn bytes_route_sizes_and_400(bin: &'static str) {
    let mut server = ServerProcess::start(bin, &[]);
    let addr = server.addr;
    for size in [0usize, 1, 100_000] {
        let resp = get(addr, &format!("/bytes?size={size}"));
        let what = format!("GET /bytes?size={size}: {} {:?}", resp.status(), resp.head);
        assert_eq!(resp.status(), 200, "{what}");
        assert_eq!(
            resp.header("content-type"),
            Some("application/octet-stream"),
            "{what}"
        );
        assert_eq!(
            resp.header("content-length"),
            Some(&*size.to_string()),
            "{what}"
        );
        assert!(!resp.head.is_chunked(), "{what}");
        assert_eq!(resp.body.len(), size, "{what}");
    }
    for bad in ["/bytes", "/bytes?size=bogus", "/bytes?size=1073741825"] {
        let resp = get(addr, bad);
        assert_eq!(resp.status(), 400, "{bad}\n{resp}");
        assert!(
            resp.text().contains("size"),
            "the 400 body should carry the parse error\n{resp}"
        );
    }
    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(10));
    server.assert_trace_legal(&[]);
}
