//! Peers cannot hold a termination, under tokio's paused clock with in-memory connections
//! and a hand-written HTTP/2 client that stays silent where a real one would answer:
//!
//! - an HTTP/2 client that had a request answered and never reads or answers again is closed
//!   one second after the stop (not at the HTTP shutdown timeout), and counted;
//! - a client that never acknowledges the GOAWAY's PING still gets the final GOAWAY a second
//!   after the first one, and its stream in flight completes (the silent client is counted);
//! - a client that stops reading a large response keeps it in flight until the request
//!   timeout (HTTP/1 and HTTP/2), then the connection is cut and counted.

use std::time::Duration;

use bytes::Bytes;
use lameduck::connection::CutKind;
use lameduck::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;

mod support;
use support::{slow, Run};

use lameduck_test_support::h2::{
    answered_ok, frames, get_frame, goaway_ids, read_frames_until, GOAWAY, H2_START,
};

/// A server (no signal handlers, shutdown delay 0) serving `n` in-memory connections with
/// `service` under `config`: the clients' ends, the handle and the running server.
fn serve(
    n: usize,
    config: Config,
    service: impl lameduck_hyper::HttpService,
) -> (Vec<DuplexStream>, lameduck_hyper::Handle, Run) {
    support::serve_in_memory(n, 8192, support::prepare(config), service)
}

#[tokio::test(start_paused = true)]
async fn an_http2_client_that_never_reads_again_is_closed_a_second_after_the_stop() {
    let (mut clients, handle, run) = serve(1, Config::default(), support::service("ok"));
    let shared = handle.shared().clone();
    let client = &mut clients[0];
    client.write_all(H2_START).await.unwrap();
    client.write_all(&get_frame(1, "/")).await.unwrap();
    let mut bytes = Vec::new();
    read_frames_until(client, &mut bytes, |f| answered_ok(f, 1)).await;

    // From now on the client reads nothing and answers nothing (not the GOAWAY's PING).
    let stop = Instant::now();
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
    let took = stop.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took <= Duration::from_millis(1100),
        "exited {took:?} after the stop (the HTTP shutdown timeout is 60 s)"
    );
    let peers = shared.counters().peer_counts();
    assert_eq!(peers.cut_in_termination(CutKind::Http2Goaway), 1);
    assert_eq!(peers.connections_cut(), 1);
    assert!(peers.last_connection_closed.is_some());
    // What it would have read: GOAWAY (all streams), its PING, then the final GOAWAY.
    let mut rest = Vec::new();
    let _ = client.read_to_end(&mut rest).await;
    bytes.extend_from_slice(&rest);
    assert_eq!(goaway_ids(&frames(&bytes)), [0x7fff_ffff, 1]);
}

#[tokio::test(start_paused = true)]
async fn without_an_acknowledgement_the_final_goaway_comes_a_second_later_and_the_stream_completes()
{
    let service = slow(Duration::from_secs(3), Bytes::from_static(b"ok"));
    let (mut clients, handle, run) = serve(1, Config::default(), service);
    let shared = handle.shared().clone();
    let client = &mut clients[0];
    client.write_all(H2_START).await.unwrap();
    client.write_all(&get_frame(1, "/")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let stop = Instant::now();
    handle.request_shutdown();
    // The client reads, but never acknowledges the PING.
    let mut bytes = Vec::new();
    read_frames_until(client, &mut bytes, |f| {
        f.iter().filter(|f| f.kind == GOAWAY).count() >= 2
    })
    .await;
    let final_after = stop.elapsed();
    assert!(
        final_after >= Duration::from_secs(1) && final_after <= Duration::from_millis(1100),
        "final GOAWAY {final_after:?} after the first"
    );
    assert_eq!(goaway_ids(&frames(&bytes)), [0x7fff_ffff, 1]);
    read_frames_until(client, &mut bytes, |f| answered_ok(f, 1)).await;
    // The stream done, the server closes the connection itself.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), client.read_to_end(&mut rest))
        .await
        .expect("the server closed the connection")
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), 0);
    // Its stream completed, but its client never acknowledged the PING: it is counted.
    let peers = shared.counters().peer_counts();
    assert_eq!(peers.cut_in_termination(CutKind::Http2Goaway), 1);
}

/// A server whose handler answers 1 MB at once, with a request timeout of 5 s.
fn large_response_server() -> (Vec<DuplexStream>, lameduck_hyper::Handle, Run) {
    let config = Config::builder()
        .request_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let body = Bytes::from(vec![b'x'; 1 << 20]);
    serve(1, config, slow(Duration::ZERO, body))
}

/// Waits until the server closes `client` without reading from it before (the client
/// stopped reading); how long after `from` that was.
async fn closed_after(client: &mut DuplexStream, from: Instant) -> Duration {
    // Writing fails once the server's end is gone: probe with an empty-ish write.
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if client.write_all(b"\0").await.is_err() {
            return from.elapsed();
        }
        assert!(from.elapsed() < Duration::from_secs(30), "never closed");
    }
}

#[tokio::test(start_paused = true)]
async fn http1_a_client_that_stops_reading_a_large_response_is_cut_at_the_request_timeout() {
    let (mut clients, handle, run) = large_response_server();
    let shared = handle.shared().clone();
    let client = &mut clients[0];
    client
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 1024];
    let n = client.read(&mut head).await.unwrap();
    assert!(head[..n].starts_with(b"HTTP/1.1 200"));
    // The client reads nothing more; the stop comes a moment later.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stop = Instant::now();
    handle.request_shutdown();
    let took = closed_after(client, stop).await;
    // The request timeout from the stop: the drain's bound, where the connection is cut.
    assert!(
        took >= Duration::from_secs(5) && took <= Duration::from_millis(5200),
        "closed {took:?} after the stop"
    );
    assert_eq!(run.await.unwrap().unwrap(), 0);
    let peers = shared.counters().peer_counts();
    assert_eq!(peers.cut_in_termination(CutKind::UnreadResponse), 1);
}

#[tokio::test(start_paused = true)]
async fn http2_a_client_that_stops_reading_a_large_response_is_cut_at_the_request_timeout() {
    let (mut clients, handle, run) = large_response_server();
    let shared = handle.shared().clone();
    let client = &mut clients[0];
    client.write_all(H2_START).await.unwrap();
    client.write_all(&get_frame(1, "/")).await.unwrap();
    // The first frames of the answer (the initial window lets out 64 KB of the 1 MB); the
    // client then never reads nor opens the window again.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stop = Instant::now();
    handle.request_shutdown();
    let took = closed_after(client, stop).await;
    assert!(
        took >= Duration::from_secs(5) && took <= Duration::from_millis(5200),
        "closed {took:?} after the stop"
    );
    assert_eq!(run.await.unwrap().unwrap(), 0);
    let peers = shared.counters().peer_counts();
    assert_eq!(peers.cut_in_termination(CutKind::UnreadResponse), 1);
}
