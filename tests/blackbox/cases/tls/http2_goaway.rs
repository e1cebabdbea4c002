//! An h2 connection over TLS gets a graceful GOAWAY at `NotAcceptingNewRequest`, its stream
//! in flight completes, and a new request on it fails.

use std::time::{Duration, Instant};

use hyper::{StatusCode, Version};

use super::{assert_ok, PairFiles};
use crate::support::h2::runtime;
use crate::support::tls::*;
use crate::support::*;

pub fn tls_http2_goaway_at_not_accepting(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let files = PairFiles::new("goaway", &ca.server("server", KeyForm::EcPkcs8));
    let flags = files.flags(&["--shutdown-delay", "1s"]);
    let mut server = start_tls(bin, &flags);
    let addr = server.addr;
    let config = client_config(&ca, &["h2"], None);

    let (sent, h2, during, in_flight, conn_end, after_goaway) = runtime().block_on(async {
        let mut h2 = h2_connect(addr, &config)
            .await
            .unwrap_or_else(|e| panic!("h2 over TLS: {e}\n{}", server.describe()));
        assert_ok(
            &h2.get("/").await,
            Version::HTTP_2,
            "h2 GET / before the signal",
        );
        let sent = server.signal("TERM");
        let during = h2.get("/").await;
        // In flight across NotAcceptingNewRequest (≈ 1 s after the signal).
        let in_flight = h2.start_get("/sleep?duration=2s").await;
        h2.wait_goaway(Duration::from_secs(5)).await;
        let in_flight = in_flight
            .await
            .unwrap_or_else(|e| Err(format!("task: {e}")));
        let conn_end = tokio::time::timeout(Duration::from_secs(10), &mut h2.conn)
            .await
            .map(|joined| joined.expect("connection task"));
        let after_goaway = h2.new_request_fails().await;
        (sent, h2, during, in_flight, conn_end, after_goaway)
    });

    assert_ok(
        &during,
        Version::HTTP_2,
        "h2 GET / during the shutdown delay",
    );
    let in_flight = in_flight.unwrap_or_else(|e| panic!("the in-flight h2 /sleep: {e}"));
    assert_eq!(
        (in_flight.status, &in_flight.body[..]),
        (StatusCode::OK, SLEEP_BODY.as_bytes()),
        "the in-flight h2 /sleep"
    );
    let not_accepting = server
        .signals()
        .time_of(NOT_ACCEPTING)
        .unwrap_or_else(|| panic!("no NotAcceptingNewRequest line\n{}", server.describe()));
    let goaways = h2.goaways();
    let ms = |at: Instant| at.saturating_duration_since(sent.before).as_millis();
    let timeline = format!(
        "GOAWAY frames (last stream id, error code, ms after the signal) {:?}, \
         NotAcceptingNewRequest read {} ms after the signal, EOF {:?} ms, /sleep done {} ms, \
         connection future {:?}",
        goaways
            .iter()
            .map(|g| (g.last_stream_id, g.error_code, ms(g.at)))
            .collect::<Vec<_>>(),
        ms(not_accepting),
        h2.eof_at().map(ms),
        ms(in_flight.at),
        conn_end.as_ref().map(|(_, r)| r),
    );
    eprintln!("{bin} h2 over TLS: {timeline}");
    assert!(
        !goaways.is_empty() && goaways.iter().all(|g| g.error_code == 0),
        "the h2 connection over TLS should get a graceful GOAWAY: {timeline}\n{}",
        server.describe()
    );
    assert!(
        goaways[0].at.saturating_duration_since(sent.before) >= Duration::from_millis(900),
        "GOAWAY came before the shutdown delay ended: {timeline}"
    );
    assert!(
        goaways[0].at < in_flight.at,
        "GOAWAY should come at NotAcceptingNewRequest, while /sleep is in flight: {timeline}"
    );
    assert!(
        goaways.last().is_some_and(|g| g.last_stream_id >= 5),
        "the final GOAWAY must cover the in-flight stream (id 5): {timeline}"
    );
    assert!(
        conn_end.is_ok(),
        "the h2 connection did not end within 10 s: {timeline}"
    );
    assert!(
        after_goaway.is_ok(),
        "a new request on the connection after GOAWAY should fail: {after_goaway:?}"
    );
    server.assert_exit(0, Duration::from_secs(15));
    server.signals().assert_common_dag_order();
    server.assert_trace_legal(&flags);
}
