//! The idle-close spread on actix-web through `AutoH2cServer` (loopback, real time, generous
//! bounds): with a 1 s spread, the idle HTTP/1 keep-alive connections are closed and the idle
//! h2c connections told GOAWAY each at its own point of the window, not in one burst, and the
//! lifecycle waits for them and exits 0; without it, the idle HTTP/1 connections are closed
//! together.

use std::time::Duration;

use lameduck_test_support::conn::read_to_close;
use lameduck_test_support::http1::{read_response, GET};
use lameduck_test_support::spread::buckets;

mod support;
use support::{exit_code, prepare_ok_server, spawn_run, Running};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use lameduck::Config;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// A running lifecycle (shutdown delay 0, the idle-close spread `spread`) on one loopback
/// listener.
fn start(spread: Duration) -> Running {
    let (addr, server) = prepare_ok_server(
        Config::builder().idle_close_spread(spread).build().unwrap(),
        2,
    );
    spawn_run(addr, server)
}

/// Serves with `spread`; opens `http1` keep-alive and `h2c` HTTP/2 connections, each
/// carrying one request and then idle; stops the server. When the stop was asked for, and
/// when each HTTP/1 connection was closed and each HTTP/2 connection ended (its client's
/// connection task, which ends once the server's final GOAWAY came and the server closed).
async fn closes(
    spread: Duration,
    http1: usize,
    h2c: usize,
) -> (Instant, Vec<Instant>, Vec<Instant>) {
    let Running { addr, handle, run } = start(spread);
    let mut waits = Vec::new();
    for _ in 0..http1 {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        conn.write_all(GET).await.unwrap();
        let reply = read_response(&mut conn).await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        waits.push(tokio::spawn(async move {
            read_to_close(&mut conn, Duration::from_secs(10))
                .await
                .expect("the server closes the connection")
                .at
        }));
    }
    let mut h2 = Vec::new();
    for _ in 0..h2c {
        let io = TokioIo::new(TcpStream::connect(addr).await.unwrap());
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        let ended = tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), conn).await;
            Instant::now()
        });
        let request = hyper::Request::builder()
            .uri(format!("http://{addr}/"))
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let _ = response.into_body().collect().await.unwrap();
        h2.push((sender, ended));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let stop = Instant::now();
    assert!(handle.request_shutdown());
    let mut http1_closes = Vec::new();
    for w in waits {
        http1_closes.push(w.await.unwrap());
    }
    let mut h2_ends = Vec::new();
    for (sender, ended) in h2 {
        h2_ends.push(ended.await.unwrap());
        drop(sender);
    }
    let code = exit_code(run, Duration::from_secs(10)).await;
    assert_eq!(code, 0);
    (stop, http1_closes, h2_ends)
}

#[actix_web::test]
async fn idle_connections_end_spread_over_the_window_or_together_without_it() {
    let spread = Duration::from_secs(1);
    let (stop, http1, h2) = closes(spread, 100, 30).await;
    let all: Vec<Instant> = http1.iter().chain(&h2).copied().collect();
    let per_bucket = buckets(stop, &all);
    // 130 ends over ten 100 ms buckets: about 13 each; never most of them at once. actix
    // stops accepting 100 ms after the signal, then the window starts: slack for that.
    assert!(
        per_bucket.iter().copied().max().unwrap() <= all.len() / 3,
        "{per_bucket:?}"
    );
    assert!(
        per_bucket.iter().filter(|&&b| b > 0).count() >= 8,
        "{per_bucket:?}"
    );
    let last = all.iter().max().unwrap().duration_since(stop);
    assert!(last < spread + Duration::from_millis(700), "{last:?}");
    for (what, ends) in [("HTTP/1", &http1), ("h2c", &h2)] {
        let first = ends.iter().min().unwrap().duration_since(stop);
        let last = ends.iter().max().unwrap().duration_since(stop);
        assert!(
            last - first > spread / 2,
            "{what}: ends from {first:?} to {last:?} after the stop"
        );
    }

    // Without the spread: the idle HTTP/1 connections close together at the stop.
    let (stop, http1, _) = closes(Duration::ZERO, 100, 0).await;
    let first = http1.iter().min().unwrap();
    let last = http1.iter().max().unwrap();
    assert!(
        last.duration_since(*first) < Duration::from_millis(100),
        "closes from {:?} to {:?} after the stop",
        first.duration_since(stop),
        last.duration_since(stop)
    );
}
