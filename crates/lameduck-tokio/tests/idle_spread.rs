//! The idle-close spread (`Config::idle_close_spread`): the connections idle when the server
//! stops listening end each at its own random point of the window, not all at once.
//!
//! - HTTP/1 over real sockets on 127.0.0.1: with a 1 s spread the server's closes (the
//!   client's end of stream) fall over the window, not in one 100 ms bucket, and all within
//!   it; with no spread they come together.
//! - HTTP/2 (in-memory, tokio's paused clock): each connection's GOAWAY comes at its own point
//!   of the window, and the lifecycle waits for them all.
//! - A request on a connection that waits for its point is answered (behind a balancer, the
//!   503 of a request after the close), and the connection ends after it; a connection busy
//!   at the stop ends after its response, as without the spread.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use lameduck::{Config, LifecycleSignal};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::net::TcpStream;
use tokio::time::Instant;

mod support;
use support::Run;

use lameduck_test_support::conn::read_to_close;
use lameduck_test_support::http1::{read_response, GET};
use lameduck_test_support::spread::buckets;

/// A configuration with shutdown delay 0 and the idle-close spread `spread`.
fn config(spread: Duration) -> Config {
    Config::builder()
        .idle_close_spread(spread)
        .build()
        .expect("valid")
}

/// Waits for the server to close `client` (end of stream, or a reset), bounded by `within`;
/// when it did.
async fn closed_at(client: &mut (impl AsyncReadExt + Unpin), within: Duration) -> Option<Instant> {
    read_to_close(client, within).await.map(|closed| closed.at)
}

/// Serves on 127.0.0.1 with `spread`, opens `n` keep-alive connections that each carry one
/// request and then stay idle, stops the server and returns when it stopped (the
/// `NotAcceptingNewRequest` signal: the listener stops then) and when each connection was
/// closed by the server.
async fn idle_closes_over_tcp(n: usize, spread: Duration) -> (Instant, Vec<Instant>) {
    let mut server = support::prepare(config(spread));
    let listener = lameduck_tokio::bind(([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let addr: SocketAddr = server
        .serve("api", listener, support::service("ok"))
        .unwrap();
    let handle = server.handle();
    let run = tokio::spawn(server.run());

    let mut clients = Vec::new();
    for _ in 0..n {
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(GET).await.unwrap();
        let reply = read_response(&mut client).await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(!reply.to_ascii_lowercase().contains("connection: close"));
        clients.push(client);
    }
    // Every connection is idle: its response has ended.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let waiting: Vec<_> = clients
        .into_iter()
        .map(|mut client| {
            tokio::spawn(async move { closed_at(&mut client, Duration::from_secs(10)).await })
        })
        .collect();
    let requested = Instant::now();
    assert!(handle.request_shutdown());
    let mut closes = Vec::new();
    for w in waiting {
        closes.push(
            w.await
                .unwrap()
                .expect("the server closes every connection"),
        );
    }
    assert_eq!(run.await.unwrap().unwrap(), 0);
    // The lifecycle's instants are on the driver's own timeline: the stop is the request's
    // time plus the (short) time from `ShutdownInitiated` to `NotAcceptingNewRequest`.
    let shared = handle.shared();
    let at = |signal| shared.fired_at(signal).expect("fired");
    let stopped = at(LifecycleSignal::NotAcceptingNewRequest)
        .saturating_duration_since(at(LifecycleSignal::ShutdownInitiated));
    (requested + stopped, closes)
}

#[tokio::test]
async fn http1_idle_connections_close_spread_over_the_window_or_together_without_it() {
    let n = 200;
    let spread = Duration::from_secs(1);
    let (stop, closes) = idle_closes_over_tcp(n, spread).await;
    let last = closes.iter().max().unwrap().duration_since(stop);
    let per_bucket = buckets(stop, &closes);
    // 200 closes over ten 100 ms buckets: about 20 each. Not one burst, and none after the
    // window (plus slack for the scheduler and the client's read).
    assert!(
        per_bucket.iter().copied().max().unwrap() <= n / 3,
        "{per_bucket:?}"
    );
    assert!(
        per_bucket.iter().filter(|&&b| b > 0).count() >= 8,
        "{per_bucket:?}"
    );
    assert!(last < spread + Duration::from_millis(500), "{last:?}");

    // Without the spread: every idle connection is closed at the stop.
    let (stop, closes) = idle_closes_over_tcp(n, Duration::ZERO).await;
    let first = closes.iter().min().unwrap();
    let last = closes.iter().max().unwrap();
    assert!(
        last.duration_since(*first) < Duration::from_millis(100),
        "closes from {:?} to {:?} after the stop",
        first.duration_since(stop),
        last.duration_since(stop)
    );
}

/// A server with `spread` (and shutdown delay 0) serving `n` in-memory connections with
/// `service`: the clients' ends, the handle and the running server.
fn serve_in_memory(
    n: usize,
    spread: Duration,
    service: impl lameduck_hyper::HttpService,
) -> (Vec<DuplexStream>, lameduck_hyper::Handle, Run) {
    support::serve_in_memory(n, 8192, support::prepare(config(spread)), service)
}

#[tokio::test(start_paused = true)]
async fn http2_connections_get_their_goaway_spread_over_the_window_and_are_waited_for() {
    let n = 100;
    let spread = Duration::from_secs(1);
    let (clients, handle, run) = serve_in_memory(n, spread, support::service("ok"));
    let mut ends = Vec::new();
    for client in clients {
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(client))
                .await
                .unwrap();
        // The connection's task: it ends when the server ends the connection (after its
        // final GOAWAY, the connection having no stream left).
        let ended = tokio::spawn(async move {
            let _ = conn.await;
            Instant::now()
        });
        let response = sender
            .send_request(http::Request::new(Empty::<Bytes>::new()))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ok");
        // Held until the end: the client keeps its side open.
        ends.push((sender, ended));
    }
    let stop = Instant::now();
    assert!(handle.request_shutdown());
    let mut closes = Vec::new();
    for (sender, ended) in ends {
        closes.push(ended.await.unwrap());
        drop(sender);
    }
    // The lifecycle waited for every connection, and ended cleanly.
    assert_eq!(run.await.unwrap().unwrap(), 0);
    let last = closes.iter().max().unwrap().duration_since(stop);
    // Each point lies inside the window; the timer rounds a deadline up to its next
    // millisecond, so the last close may come at the window's very end.
    assert!(last <= spread, "{last:?}");
    let per_bucket = buckets(stop, &closes);
    assert!(
        per_bucket.iter().copied().max().unwrap() <= n / 3,
        "{per_bucket:?}"
    );
    assert!(
        per_bucket.iter().filter(|&&b| b > 0).count() >= 8,
        "{per_bucket:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_before_its_connections_point_is_answered_and_a_busy_connection_ends_after_its_response(
) {
    let slow = tower::service_fn(|req: http::Request<hyper::body::Incoming>| async move {
        if req.uri().path() == "/slow" {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"ok"))))
    });
    // A long window: every connection's point is (all but surely) far from the stop.
    let spread = Duration::from_secs(50);
    let (mut clients, handle, run) = serve_in_memory(6, spread, slow);
    for client in &mut clients {
        client.write_all(GET).await.unwrap();
        assert!(read_response(client).await.starts_with("HTTP/1.1 200"));
    }
    let mut busy = clients.pop().unwrap();
    busy.write_all(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let stop = Instant::now();
    assert!(handle.request_shutdown());

    // The busy connection: its response goes out with `Connection: close` and the
    // connection closes after it, at once, as without the spread.
    let reply = read_response(&mut busy).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(
        reply.to_ascii_lowercase().contains("connection: close"),
        "{reply}"
    );
    let closed = closed_at(&mut busy, Duration::from_secs(1)).await;
    assert!(
        closed.is_some_and(|at| at.duration_since(stop) < Duration::from_millis(200)),
        "{closed:?}"
    );

    // The idle ones are still open, waiting for their points: a request that comes on one
    // is answered as any request after the close (behind a balancer: the 503 that sends its
    // client elsewhere), and the connection closes after it.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut answered = 0;
    for client in &mut clients {
        if client.write_all(GET).await.is_err() {
            continue; // Its point came already (a chance of about 1 in 2,000).
        }
        let reply = read_response(client).await;
        if reply.is_empty() {
            continue;
        }
        assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
        assert!(
            reply.to_ascii_lowercase().contains("connection: close"),
            "{reply}"
        );
        assert!(closed_at(client, Duration::from_secs(1)).await.is_some());
        answered += 1;
    }
    assert!(answered >= 1, "no connection waited for its point");
    assert_eq!(run.await.unwrap().unwrap(), 0);
}
