//! A slow pre-shutdown hook holds back `NotAcceptingNewRequest` past the delay.

use std::time::Duration;

use crate::support::*;

const HOOK: Duration = Duration::from_secs(2);

pub fn slow_pre_shutdown_hook(bin: &'static str) {
    let mut server = ServerProcess::start(
        bin,
        &[
            "--pre-shutdown-hook-duration",
            "2s",
            "--shutdown-delay",
            "500ms",
        ],
    );
    let addr = server.addr;
    // A pre-shutdown hook adds no health check.
    assert_health(
        addr,
        "/readyz?verbose",
        200,
        READYZ_VERBOSE_OK,
        "with a pre-shutdown hook",
    );
    assert_health(
        addr,
        "/livez?verbose",
        200,
        LIVEZ_VERBOSE_OK,
        "with a pre-shutdown hook",
    );
    assert_health(
        addr,
        "/healthz?verbose",
        200,
        HEALTHZ_VERBOSE_OK,
        "with a pre-shutdown hook",
    );
    let mut reused = Conn::connect(addr).expect("connect");
    assert_reply(
        &reused.get("/").expect("GET /"),
        200,
        "ok",
        "GET / before the signal",
    );

    let sent = server.signal("TERM");
    assert_readyz_turns_red(&server, sent);

    // One second in: the delay is over, the hook is still running, requests are served.
    server.wait_signal(AFTER_SHUTDOWN_DELAY, Duration::from_secs(3));
    sleep_until(sent.after + Duration::from_secs(1));
    assert_reply(
        &get(addr, "/"),
        200,
        "ok",
        "new connection 1 s after the signal",
    );
    let resp = reused
        .get("/")
        .expect("GET / on the reused connection 1 s after the signal");
    assert_reply(&resp, 200, "ok", "reused connection 1 s after the signal");
    let log = server.signals();
    assert!(
        !log.has(NOT_ACCEPTING) && !log.has(PRE_SHUTDOWN_HOOKS_STOPPED),
        "the 2 s hook should still hold back NotAcceptingNewRequest\n{}",
        log.render()
    );

    let not_accepting = server.wait_signal(NOT_ACCEPTING, Duration::from_secs(10));
    let after_signal = not_accepting.duration_since(sent.before);
    assert!(
        after_signal + Duration::from_millis(20) >= HOOK,
        "NotAcceptingNewRequest {after_signal:?} after the signal, before the {HOOK:?} hook ended"
    );

    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(&[
        "--pre-shutdown-hook-duration",
        "2s",
        "--shutdown-delay",
        "500ms",
    ]);
    let log = server.signals();
    log.assert_common_dag_order();
    log.assert_before(AFTER_SHUTDOWN_DELAY, PRE_SHUTDOWN_HOOKS_STOPPED);
}
