//! HTTP/2 (h2c with prior knowledge): many streams on one connection complete across the
//! termination and the connection gets GOAWAY (close-listener mode); in retry-after mode a
//! request on an open h2 connection gets the 429 and the connection is then closed with GOAWAY.

use std::time::{Duration, Instant};

use hyper::{StatusCode, Version};

use crate::support::h2::{runtime, single_thread_runtime, H2Conn, H2Response};
use crate::support::*;

const STREAMS: u32 = 40;

pub fn http2_streams_complete_then_goaway(bin: &'static str) {
    let mut server = ServerProcess::start(bin, &["--shutdown-delay", "200ms"]);
    let addr = server.addr;
    let (sent, completed, conn_end, h2, after_goaway) = runtime().block_on(async {
        let mut h2 = H2Conn::connect(addr).await;
        let warm = h2.get("/").await.expect("GET / over h2c");
        assert_eq!(
            (warm.status, warm.version),
            (StatusCode::OK, Version::HTTP_2)
        );
        assert_eq!(&warm.body[..], b"ok");

        let mut streams = Vec::new();
        for _ in 0..STREAMS {
            streams.push(h2.start_get("/sleep?duration=2s").await);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sent = server.signal("TERM");

        let mut completed: Vec<Result<H2Response, String>> = Vec::new();
        for stream in streams {
            completed.push(stream.await.unwrap_or_else(|e| Err(format!("task: {e}"))));
        }
        let conn_end = tokio::time::timeout(Duration::from_secs(10), &mut h2.conn)
            .await
            .map(|joined| joined.expect("connection task"));
        let after_goaway = h2.new_request_fails().await;
        (sent, completed, conn_end, h2, after_goaway)
    });

    let failures: Vec<&String> = completed.iter().filter_map(|c| c.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {STREAMS} h2 streams failed, e.g. {:?}\n{}",
        failures.len(),
        &failures[..failures.len().min(5)],
        server.describe()
    );
    let mut first_done = None::<Instant>;
    for resp in completed.iter().flatten() {
        assert_eq!(resp.status, StatusCode::OK, "h2 /sleep status");
        assert_eq!(resp.version, Version::HTTP_2, "h2 /sleep version");
        assert_eq!(&resp.body[..], SLEEP_BODY.as_bytes(), "h2 /sleep body");
        first_done = Some(first_done.map_or(resp.at, |f| f.min(resp.at)));
    }
    let not_accepting = server
        .signals()
        .time_of(NOT_ACCEPTING)
        .unwrap_or_else(|| panic!("no NotAcceptingNewRequest line\n{}", server.describe()));
    assert!(
        first_done.is_some_and(|first| not_accepting < first),
        "the streams were meant to be in flight at NotAcceptingNewRequest"
    );

    let goaways = h2.goaways();
    let ms = |at: Instant| at.saturating_duration_since(sent.before).as_millis();
    let timeline = format!(
        "GOAWAY frames (last stream id, error code, ms after the signal) {:?}, \
         EOF {:?} ms after the signal, first stream done {:?} ms after the signal, \
         connection future {:?}",
        goaways
            .iter()
            .map(|g| (g.last_stream_id, g.error_code, ms(g.at)))
            .collect::<Vec<_>>(),
        h2.eof_at().map(ms),
        first_done.map(ms),
        conn_end.as_ref().map(|(_, r)| r),
    );
    eprintln!("{bin} h2: {timeline}");
    assert!(
        !goaways.is_empty(),
        "the h2 connection received no GOAWAY: {timeline}\n{}",
        server.describe()
    );
    assert!(
        goaways.iter().all(|g| g.error_code == 0),
        "GOAWAY must be graceful (NO_ERROR): {timeline}"
    );
    assert!(
        first_done.is_some_and(|first| goaways[0].at < first),
        "GOAWAY should come at NotAcceptingNewRequest, while the streams are in flight \
         (docs/design.md#client-view, close-listener mode after N): {timeline}"
    );
    let highest_stream = 2 * STREAMS + 1;
    assert!(
        goaways
            .last()
            .is_some_and(|g| g.last_stream_id >= highest_stream),
        "the final GOAWAY must cover the {STREAMS} accepted streams (ids up to \
         {highest_stream}): {timeline}"
    );
    assert!(
        conn_end.is_ok(),
        "the h2 connection did not end within 10 s after the streams: {timeline}"
    );
    assert!(
        after_goaway.is_ok(),
        "a new request on the connection after GOAWAY should fail: {after_goaway:?}"
    );

    server.assert_exit(0, Duration::from_secs(15));
    server.signals().assert_common_dag_order();
    server.assert_trace_legal(&["--shutdown-delay", "200ms"]);
}

#[track_caller]
fn assert_h2_retry_after(resp: &Result<H2Response, String>, what: &str) {
    let resp = resp
        .as_ref()
        .unwrap_or_else(|e| panic!("{what}: no reply: {e}"));
    let shown = format!("{resp:?}");
    assert_eq!(
        resp.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{what}: {shown}"
    );
    assert_eq!(resp.header("retry-after"), Some("5"), "{what}: {shown}");
    assert_eq!(
        &resp.body[..],
        RETRY_AFTER_BODY.as_bytes(),
        "{what}: {shown}"
    );
}

pub fn http2_retry_after_mode(bin: &'static str) {
    let mut server = ServerProcess::start(
        bin,
        &["--shutdown-send-retry-after", "--shutdown-delay", "500ms"],
    );
    let addr = server.addr;
    let rt = single_thread_runtime();
    rt.block_on(async {
        let mut reused = H2Conn::connect(addr).await;
        let warm = reused.get("/").await.expect("GET / over h2c");
        assert_eq!(warm.status, StatusCode::OK);
        // Holds the drain open until ≈ T0 + 3.3 s, on its own connection.
        let mut holder = H2Conn::connect(addr).await;
        let in_flight = holder.start_get("/sleep?duration=3500ms").await;
        tokio::time::sleep(Duration::from_millis(200)).await;

        server.signal("TERM");
        let during = reused
            .get("/")
            .await
            .expect("GET / over h2c during the delay");
        assert_eq!(during.status, StatusCode::OK, "h2 request during the delay");

        let deadline = Instant::now() + Duration::from_secs(10);
        while !server.signals().has(NOT_ACCEPTING) {
            assert!(
                Instant::now() < deadline,
                "no NotAcceptingNewRequest\n{}",
                server.describe()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The open connection: 429, then GOAWAY (HTTP/2's `Connection: close`).
        let mut resp = reused.get("/").await;
        let retry_until = Instant::now() + Duration::from_secs(1);
        while matches!(&resp, Ok(r) if r.status == StatusCode::OK) && Instant::now() < retry_until {
            tokio::time::sleep(Duration::from_millis(20)).await;
            resp = reused.get("/").await;
        }
        assert_h2_retry_after(
            &resp,
            "h2 request on an open connection after N (retry-after mode)",
        );
        let goaways = reused.wait_goaway(Duration::from_secs(3)).await;
        assert!(
            !goaways.is_empty() && goaways.iter().all(|g| g.error_code == 0),
            "after a 429 with `Connection: close` semantics the h2 connection should get a \
             graceful GOAWAY; got {goaways:?}"
        );

        // A new h2 connection: 429 too (retry-after mode keeps listening until drained).
        let mut fresh = H2Conn::connect(addr).await;
        assert_h2_retry_after(
            &fresh.get("/").await,
            "new h2 connection after N (retry-after mode)",
        );
        // Exempt paths are answered over h2 as well.
        let mut health = H2Conn::connect(addr).await;
        let livez = health.get("/livez").await.expect("h2 /livez after N");
        assert_eq!(
            (livez.status, &livez.body[..]),
            (StatusCode::OK, &b"ok"[..])
        );
        assert!(
            !server.signals().has(IN_FLIGHT_DRAINED),
            "the checks above were meant to run before the drain ended\n{}",
            server.describe()
        );

        let done = in_flight
            .await
            .unwrap_or_else(|e| Err(format!("task: {e}")))
            .expect("in-flight h2 /sleep");
        assert_eq!(done.status, StatusCode::OK, "in-flight h2 /sleep");
        assert_eq!(&done.body[..], SLEEP_BODY.as_bytes());
    });
    server.assert_exit(0, Duration::from_secs(15));
    let log = server.signals();
    log.assert_common_dag_order();
    log.assert_before(IN_FLIGHT_DRAINED, STOPPED_LISTENING);
    server.assert_trace_legal(&["--shutdown-send-retry-after", "--shutdown-delay", "500ms"]);
}
