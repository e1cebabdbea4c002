//! Close-listener mode (the default): the listener closes at `NotAcceptingNewRequest`
//! (`docs/design.md#dag`, `docs/design.md#client-view`).

use std::time::Duration;

use crate::support::*;

const DELAY: Duration = Duration::from_millis(1500);

pub fn close_listener_mode_timeline(bin: &'static str) {
    let mut server = ServerProcess::start(bin, &["--shutdown-delay", "1500ms"]);
    let addr = server.addr;
    assert_reply(&get(addr, "/"), 200, "ok", "GET / before the signal");
    assert_health(addr, "/readyz", 200, "ok", "before the signal");

    // A keep-alive connection used before, during and after the delay.
    let mut reused = Conn::connect(addr).expect("connect");
    let first = reused.get("/").expect("GET / on the keep-alive connection");
    assert_reply(&first, 200, "ok", "GET / on the keep-alive connection");
    assert!(
        !first.head.connection_close(),
        "keep-alive reply closes\n{first}"
    );

    // An in-flight request spanning NotAcceptingNewRequest (≈ T0 + 1.5 s): ends ≈ T0 + 3.3 s.
    let mut in_flight = Conn::connect(addr).expect("connect");
    in_flight
        .send_get("/sleep?duration=3500ms", &[])
        .expect("send /sleep");
    std::thread::sleep(Duration::from_millis(200));

    let sent = server.signal("TERM");
    assert_readyz_turns_red(&server, sent);
    assert_health(addr, "/livez", 200, "ok", "during the delay");
    assert_health(addr, "/healthz", 200, "ok", "during the delay");

    // Served normally during the delay, on new and on reused connections.
    for i in 0..3 {
        assert_reply(
            &get(addr, "/"),
            200,
            "ok",
            &format!("new connection #{i} during the delay"),
        );
        let resp = reused
            .get("/")
            .expect("GET / on the reused connection during the delay");
        assert_reply(
            &resp,
            200,
            "ok",
            &format!("reused connection #{i} during the delay"),
        );
        assert!(
            !resp.head.connection_close(),
            "reused connection closed during the delay\n{resp}"
        );
    }
    assert!(
        !server.signals().has(NOT_ACCEPTING),
        "the checks above were meant to run inside the delay\n{}",
        server.describe()
    );

    let not_accepting = server.wait_signal(NOT_ACCEPTING, Duration::from_secs(10));
    let after_signal = not_accepting.duration_since(sent.before);
    assert!(
        after_signal + Duration::from_millis(20) >= DELAY,
        "NotAcceptingNewRequest {after_signal:?} after the signal, before the {DELAY:?} delay"
    );

    // New connections refused; the idle keep-alive connection closed by the server.
    assert_refused_soon(&server, Duration::from_secs(2));
    let idle = reused.idle_state(Duration::from_secs(3));
    assert_eq!(
        idle,
        IdleState::Closed,
        "idle keep-alive connection not closed ~3 s after NotAcceptingNewRequest\n{}",
        server.describe()
    );

    // The in-flight request completes, and its keep-alive connection closes after the reply.
    let resp = in_flight.read_response().unwrap_or_else(|e| {
        panic!(
            "in-flight /sleep across the termination: {e}\n{}",
            server.describe()
        )
    });
    assert_reply(&resp, 200, SLEEP_BODY, "in-flight /sleep");
    assert!(
        resp.head.connection_close(),
        "a keep-alive reply completed after NotAcceptingNewRequest must carry \
         `Connection: close`\n{resp}"
    );
    assert_eq!(
        in_flight.idle_state(Duration::from_secs(3)),
        IdleState::Closed,
        "connection of the in-flight request not closed after its reply"
    );

    server.assert_exit(0, Duration::from_secs(15));
    server.assert_trace_legal(&["--shutdown-delay", "1500ms"]);
    let log = server.signals();
    log.assert_common_dag_order();
}
