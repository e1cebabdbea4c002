//! Requests that race a connection's goodbye, under tokio's paused clock with in-memory
//! connections: none fails at the client.
//!
//! - HTTP/2: a stream that arrives after the server stopped accepting, but before its final
//!   GOAWAY, is served.
//! - HTTP/1, sockets that outlive the process (socket activation, hand-over): a request on a
//!   kept-alive connection during the drain is served with `Connection: close`; an idle
//!   connection is kept open for it for a moment instead of being closed under it.
//! - HTTP/1 behind a balancer: a request after the close gets the 503 with `Retry-After`
//!   and `Connection: close`; a connection that has carried no request yet is kept for its
//!   first one rather than closed under it.

use std::time::Duration;

use lameduck::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

mod support;
use support::Run;

use lameduck_test_support::h2::{
    answered_ok, frame, frames, get_frame, ping_ack, read_frames_until, status_byte, GOAWAY,
    H2_START, PING, WINDOW_UPDATE,
};
use lameduck_test_support::http1::{read_response, GET};

/// A server (no signal handlers, shutdown delay 0) serving `n` in-memory connections, its
/// sockets outliving it or not: the clients' ends, the handle and the running server.
fn serve(n: usize, outlive: bool) -> (Vec<DuplexStream>, lameduck_hyper::Handle, Run) {
    serve_with(n, outlive, support::service("ok"))
}

/// [`serve`] with `service` as the handler.
fn serve_with(
    n: usize,
    outlive: bool,
    service: impl lameduck_hyper::HttpService,
) -> (Vec<DuplexStream>, lameduck_hyper::Handle, Run) {
    let mut server = support::prepare(Config::default());
    if outlive {
        server.sockets_outlive_process();
    }
    support::serve_in_memory(n, 8192, server, service)
}

/// `reply` is a 200 `ok` that closes its connection, and the server then closes it.
async fn assert_served_then_closed(client: &mut DuplexStream, reply: &str) {
    assert!(reply.starts_with("HTTP/1.1 200"), "not served: {reply:?}");
    assert!(reply.ends_with("ok"), "{reply}");
    assert!(
        reply.to_ascii_lowercase().contains("connection: close"),
        "{reply}"
    );
    assert!(closed_within(client, Duration::from_secs(1)).await);
}

/// Whether the server closes `client` within `within` (virtual time).
async fn closed_within(client: &mut DuplexStream, within: Duration) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(within, client.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(start_paused = true)]
async fn sockets_outlive_a_request_on_a_kept_alive_connection_after_the_stop_is_served_and_closes_it(
) {
    let (mut clients, handle, run) = serve(1, true);
    let client = &mut clients[0];
    client.write_all(GET).await.unwrap();
    let first = read_response(client).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(
        !first.to_ascii_lowercase().contains("connection: close"),
        "{first}"
    );

    // Shutdown delay 0: the gate closes at once. The client sends its next request on the
    // kept-alive connection a moment later, as a busy client does.
    handle.request_shutdown();
    tokio::time::sleep(Duration::from_millis(50)).await;
    client.write_all(GET).await.unwrap();
    let second = read_response(client).await;
    assert_served_then_closed(client, &second).await;
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn sockets_outlive_a_connection_busy_at_the_stop_serves_the_next_request_instead_of_closing_under_it(
) {
    let slow = support::slow(Duration::from_millis(100), bytes::Bytes::from_static(b"ok"));
    let (mut clients, handle, run) = serve_with(1, true, slow);
    let client = &mut clients[0];

    // The request is admitted before the signal: its response says nothing of closing.
    client.write_all(GET).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    handle.request_shutdown();
    let first = read_response(client).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    // So the client sends its next request on the same connection: it is served, and the
    // connection closes after it, instead of closing under it.
    client.write_all(GET).await.unwrap();
    let second = read_response(client).await;
    assert_served_then_closed(client, &second).await;
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn sockets_outlive_an_idle_connection_that_stays_silent_is_closed_after_the_linger() {
    let (mut clients, handle, run) = serve(1, true);
    let client = &mut clients[0];
    client.write_all(GET).await.unwrap();
    assert!(read_response(client).await.starts_with("HTTP/1.1 200"));
    let stopped = tokio::time::Instant::now();
    handle.request_shutdown();
    assert!(closed_within(client, Duration::from_secs(5)).await);
    let waited = stopped.elapsed();
    assert!(
        waited >= lameduck::connection::IDLE_CONNECTION_LINGER - Duration::from_millis(10)
            && waited <= lameduck::connection::IDLE_CONNECTION_LINGER + Duration::from_millis(100),
        "closed {waited:?} after the stop"
    );
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn behind_a_balancer_an_idle_keep_alive_connection_closes_at_the_stop_and_a_late_request_gets_503_with_close(
) {
    let (mut clients, handle, run) = serve(2, false);
    let mut idle = clients.remove(0);
    let mut fresh = clients.remove(0);
    idle.write_all(GET).await.unwrap();
    assert!(read_response(&mut idle).await.starts_with("HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(10)).await;

    handle.request_shutdown();
    // Go's Server.Shutdown: the idle keep-alive connection is closed at once.
    assert!(closed_within(&mut idle, Duration::from_millis(50)).await);
    // The connection that carried nothing yet is kept for its first request, which is new
    // work behind a balancer: kube-apiserver's 503, and the connection closes after it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    fresh.write_all(GET).await.unwrap();
    let reply = read_response(&mut fresh).await;
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    let lower = reply.to_ascii_lowercase();
    assert!(lower.contains("retry-after: 1"), "{reply}");
    assert!(lower.contains("connection: close"), "{reply}");
    assert!(closed_within(&mut fresh, Duration::from_secs(1)).await);
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn http2_a_stream_that_races_the_goaway_is_served() {
    let (mut clients, handle, run) = serve(1, false);
    let client = &mut clients[0];
    client.write_all(H2_START).await.unwrap();
    client.write_all(&get_frame(1, "/")).await.unwrap();
    let mut bytes = Vec::new();
    read_frames_until(client, &mut bytes, |f| answered_ok(f, 1)).await;

    // Shutdown delay 0: the server stops accepting and says GOAWAY (with the highest stream
    // id, and a PING). The client sends a stream before it has read the GOAWAY.
    handle.request_shutdown();
    read_frames_until(client, &mut bytes, |f| f.iter().any(|f| f.kind == GOAWAY)).await;
    client.write_all(&get_frame(3, "/")).await.unwrap();
    read_frames_until(client, &mut bytes, |f| answered_ok(f, 3)).await;
    assert_eq!(
        status_byte(&bytes, 3),
        Some(0x88),
        "stream 3 was not answered 200"
    );
    drop(clients);
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn http2_a_new_connection_at_the_stop_gets_its_first_stream_served_then_goaway() {
    let (mut clients, handle, run) = serve(1, false);
    let client = &mut clients[0];
    client.write_all(H2_START).await.unwrap();
    let mut bytes = Vec::new();
    read_frames_until(client, &mut bytes, |f| !f.is_empty()).await;

    // The connection has carried no stream yet (it may still be in its handshake): the stop
    // does not close it under the client's first stream, which comes a moment later.
    handle.request_shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    client.write_all(&get_frame(1, "/")).await.unwrap();
    read_frames_until(client, &mut bytes, |f| answered_ok(f, 1)).await;
    assert_eq!(
        status_byte(&bytes, 1),
        Some(0x88),
        "stream 1 was not answered 200"
    );
    read_frames_until(client, &mut bytes, |f| f.iter().any(|f| f.kind == GOAWAY)).await;
    drop(clients);
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

/// A client that sends a stream just after the final GOAWAY (grpcio does, under load: its
/// PING acknowledgement overtakes streams it has queued) and a WINDOW_UPDATE for it: the
/// server ignores the stream, and must ignore the WINDOW_UPDATE too, so that the stream in
/// flight (below the last-stream-id) completes.
#[tokio::test(start_paused = true)]
async fn http2_a_window_update_for_a_stream_after_the_final_goaway_does_not_end_the_connection() {
    let slow = support::slow(Duration::from_secs(1), bytes::Bytes::from_static(b"ok"));
    let (mut clients, handle, run) = serve_with(1, false, slow);
    let client = &mut clients[0];
    client.write_all(H2_START).await.unwrap();
    client.write_all(&get_frame(1, "/")).await.unwrap();
    let mut bytes = Vec::new();
    tokio::time::sleep(Duration::from_millis(10)).await;
    handle.request_shutdown();
    read_frames_until(client, &mut bytes, |f| f.iter().any(|f| f.kind == PING)).await;
    let ping = frames(&bytes)
        .into_iter()
        .find(|f| f.kind == PING)
        .map(|f| f.payload)
        .unwrap();
    client.write_all(&ping_ack(&ping)).await.unwrap();
    read_frames_until(client, &mut bytes, |f| {
        f.iter().filter(|f| f.kind == GOAWAY).count() >= 2
    })
    .await;
    // Stream 3, above the final GOAWAY's last-stream-id (1), and a WINDOW_UPDATE for it.
    client.write_all(&get_frame(3, "/")).await.unwrap();
    client
        .write_all(&frame(WINDOW_UPDATE, 0, 3, &[0, 0, 0x10, 0]))
        .await
        .unwrap();
    read_frames_until(client, &mut bytes, |f| answered_ok(f, 1)).await;
    let errors: Vec<Vec<u8>> = frames(&bytes)
        .into_iter()
        .filter(|f| f.kind == GOAWAY)
        .map(|f| f.payload[4..8].to_vec())
        .collect();
    assert!(
        errors.iter().all(|code| code == &[0, 0, 0, 0]),
        "GOAWAY error codes {errors:?}"
    );
    drop(clients);
    assert_eq!(run.await.unwrap().unwrap(), 0);
}
