//! Retry-after mode (`--shutdown-send-retry-after`): 429 until drained, then the listener closes.

use std::time::{Duration, Instant};

use crate::support::*;

pub fn retry_after_mode_timeline(bin: &'static str) {
    let mut server = ServerProcess::start(
        bin,
        &["--shutdown-send-retry-after", "--shutdown-delay", "1s"],
    );
    let addr = server.addr;
    assert_reply(&get(addr, "/"), 200, "ok", "GET / before the signal");

    let mut reused = Conn::connect(addr).expect("connect");
    let resp = reused.get("/").expect("GET / on the keep-alive connection");
    assert_reply(&resp, 200, "ok", "GET / on the keep-alive connection");

    // In flight across NotAcceptingNewRequest (≈ T0 + 1 s); the drain ends ≈ T0 + 3.8 s.
    let mut in_flight = Conn::connect(addr).expect("connect");
    in_flight
        .send_get("/sleep?duration=4s", &[])
        .expect("send /sleep");
    std::thread::sleep(Duration::from_millis(200));

    let sent = server.signal("TERM");
    assert_readyz_turns_red(&server, sent);
    assert_health(addr, "/livez", 200, "ok", "during the delay");
    assert_reply(
        &get(addr, "/"),
        200,
        "ok",
        "new connection during the delay",
    );
    let resp = reused
        .get("/")
        .expect("GET / on the reused connection during the delay");
    assert_reply(&resp, 200, "ok", "reused connection during the delay");
    assert!(
        !server.signals().has(NOT_ACCEPTING),
        "the checks above were meant to run inside the delay\n{}",
        server.describe()
    );

    server.wait_signal(NOT_ACCEPTING, Duration::from_secs(10));

    // New connection: 429 (a 200 is tolerated only for a moment after the log line).
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut fresh = loop {
        let mut conn = Conn::connect(addr).expect("retry-after mode keeps listening until drained");
        let resp = conn.get("/").expect("GET / on a new connection after N");
        if resp.status() != 200 || Instant::now() >= deadline {
            assert_retry_after(&resp, "new connection after NotAcceptingNewRequest");
            break conn;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        fresh.idle_state(Duration::from_secs(2)),
        IdleState::Closed,
        "connection not closed after its 429 with `Connection: close`"
    );

    // Reused connection: 429 too.
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let resp = reused
            .get("/")
            .expect("the idle keep-alive connection stays open in retry-after mode and gets a 429");
        if resp.status() != 200 || Instant::now() >= deadline {
            assert_retry_after(&resp, "reused connection after NotAcceptingNewRequest");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        reused.idle_state(Duration::from_secs(2)),
        IdleState::Closed,
        "reused connection not closed after its 429 with `Connection: close`"
    );

    // Long-running requests are rejected too; health paths are exempt and answered.
    assert_retry_after(
        &get(addr, "/watch"),
        "GET /watch after NotAcceptingNewRequest",
    );
    assert_retry_after(
        &get(addr, "/sleep?duration=10ms"),
        "GET /sleep after NotAcceptingNewRequest",
    );
    let exempt = "exempt, between NotAcceptingNewRequest and the drain";
    assert_health(addr, "/readyz", 500, READYZ_SHUTTING_DOWN, exempt);
    assert_health(addr, "/readyz?verbose", 500, READYZ_SHUTTING_DOWN, exempt);
    assert_health(addr, "/livez", 200, "ok", exempt);
    assert_health(addr, "/livez?verbose", 200, LIVEZ_VERBOSE_OK, exempt);
    assert_health(addr, "/healthz", 200, "ok", exempt);
    assert!(
        !server.signals().has(IN_FLIGHT_DRAINED),
        "the checks above were meant to run before the drain ended\n{}",
        server.describe()
    );

    let resp = in_flight.read_response().unwrap_or_else(|e| {
        panic!(
            "in-flight /sleep across the termination: {e}\n{}",
            server.describe()
        )
    });
    assert_reply(&resp, 200, SLEEP_BODY, "in-flight /sleep");

    // After the drain the listener closes.
    server.wait_signal(STOPPED_LISTENING, Duration::from_secs(10));
    assert_refused_soon(&server, Duration::from_secs(3));
    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(&["--shutdown-send-retry-after", "--shutdown-delay", "1s"]);
    let log = server.signals();
    log.assert_common_dag_order();
    log.assert_before(IN_FLIGHT_DRAINED, STOPPED_LISTENING);
}
