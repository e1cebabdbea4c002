//! `--goaway-chance`: while the server serves normally, an admitted request ends its
//! connection gracefully by chance (HTTP/1 `Connection: close`, HTTP/2 GOAWAY), so clients
//! pinned to a pod by an L4 balancer re-dial; health and metrics requests never do.

use std::time::Duration;

use hyper::StatusCode;

use crate::support::h2::{single_thread_runtime, H2Conn};
use crate::support::http1::{Conn, IdleState};
use crate::support::*;

/// Requests sent over each protocol.
const REQUESTS: usize = 1_000;
/// At a chance of 0.02, 1,000 requests end about 20 connections; these bounds fail by
/// accident with a probability under one in a million.
const CLOSES: std::ops::RangeInclusive<usize> = 3..=50;

pub fn goaway_chance_ends_connections_by_chance(bin: &'static str) {
    let mut server = ServerProcess::start(bin, &["--goaway-chance", "0.02"]);
    let addr = server.addr;

    // HTTP/1: every response is served; about one in fifty says `Connection: close`, and the
    // server then closes the connection.
    let (mut conn, mut closes) = (connect(addr), 0);
    for i in 0..REQUESTS {
        let resp = conn
            .get("/")
            .unwrap_or_else(|e| panic!("HTTP/1 GET / #{i} failed: {e}\n{}", server.describe()));
        assert_eq!((resp.status(), resp.text().as_str()), (200, "ok"));
        if resp.head.connection_close() {
            closes += 1;
            assert!(
                matches!(conn.idle_state(Duration::from_secs(5)), IdleState::Closed),
                "the server must close the connection after `Connection: close`"
            );
            conn = connect(addr);
        }
    }
    eprintln!("{bin}: HTTP/1 connections ended by chance: {closes} in {REQUESTS} requests");
    assert!(
        CLOSES.contains(&closes),
        "{closes} HTTP/1 connections ended in {REQUESTS} requests at a chance of 0.02"
    );

    // Health and metrics are exempt: never `Connection: close`.
    let mut conn = connect(addr);
    for path in ["/readyz", "/livez", "/metrics"] {
        for _ in 0..200 {
            let resp = conn.get(path).expect("exempt GET");
            assert_eq!(resp.status(), 200, "{path}");
            assert!(!resp.head.connection_close(), "{path} ended its connection");
        }
    }

    let (goaways, retried) = single_thread_runtime().block_on(h2_requests(addr));
    eprintln!(
        "{bin}: HTTP/2 connections ended by GOAWAY: {goaways} in {REQUESTS} requests \
         ({retried} requests retried on a new connection after a GOAWAY)"
    );
    assert!(
        CLOSES.contains(&goaways),
        "{goaways} HTTP/2 connections ended in {REQUESTS} requests at a chance of 0.02"
    );

    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(15));
}

/// Sends [`REQUESTS`] GETs over h2c, one at a time, moving to a new connection after each
/// GOAWAY (and retrying a request the GOAWAY refused, as Go's client does; on one thread,
/// hyper's client fails no other: see [`single_thread_runtime`]). Returns the
/// GOAWAYs seen and the requests retried.
async fn h2_requests(addr: std::net::SocketAddr) -> (usize, usize) {
    let (mut h2, mut goaways, mut retried) = (H2Conn::connect(addr).await, 0, 0);
    let mut i = 0;
    while i < REQUESTS {
        match h2.get("/").await {
            Ok(resp) => {
                assert_eq!(resp.status, StatusCode::OK, "h2 GET / #{i}");
                i += 1;
            }
            Err(e) => {
                // Only a request the server refused with its GOAWAY may be retried.
                let seen = h2.wait_goaway(Duration::from_secs(2)).await;
                assert!(!seen.is_empty(), "h2 GET / #{i} failed without GOAWAY: {e}");
                retried += 1;
            }
        }
        let seen = h2.goaways();
        if !seen.is_empty() {
            assert!(
                seen.iter().all(|g| g.error_code == 0),
                "GOAWAY must be graceful (NO_ERROR): {seen:?}"
            );
            goaways += 1;
            let ended = tokio::time::timeout(Duration::from_secs(5), &mut h2.conn).await;
            assert!(
                ended.is_ok(),
                "the connection must end after its GOAWAY and its streams"
            );
            h2 = H2Conn::connect(addr).await;
        }
    }
    (goaways, retried)
}

fn connect(addr: std::net::SocketAddr) -> Conn {
    let conn = Conn::connect(addr).expect("connect");
    conn.set_read_timeout(Duration::from_secs(10))
        .expect("read timeout");
    conn
}
