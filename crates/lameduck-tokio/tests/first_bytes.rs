//! A connection before its protocol is known (its first bytes, which tell HTTP/1 from
//! HTTP/2's preface), under tokio's paused clock: the header-read timeout applies, a shutdown
//! closes it at once, and a request split anywhere in its first bytes is served.

use std::time::Duration;

use lameduck::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

mod support;
use support::Run;

use lameduck_test_support::conn::read_to_close;

/// A server (no signal handlers) serving one in-memory connection with a handler that answers
/// `ok`: the client's end, the handle and the running server.
fn serve_one() -> (DuplexStream, lameduck_hyper::Handle, Run) {
    let server = support::prepare(Config::default());
    let (mut clients, handle, run) =
        support::serve_in_memory(1, 4096, server, support::service("ok"));
    (clients.remove(0), handle, run)
}

/// Reads until the server closes the connection (bounded: 120 virtual seconds); how long it
/// took, or `None` if it stayed open.
async fn closed_after(client: &mut DuplexStream) -> Option<Duration> {
    read_to_close(client, Duration::from_secs(120))
        .await
        .map(|closed| closed.after)
}

#[tokio::test(start_paused = true)]
async fn a_connection_that_sends_part_of_the_http2_preface_is_closed_after_the_header_timeout() {
    let (mut client, handle, run) = serve_one();
    client.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    let waited = closed_after(&mut client)
        .await
        .expect("the connection stayed open");
    assert!(
        waited >= Duration::from_secs(29) && waited <= Duration::from_secs(31),
        "closed {waited:?} after the partial preface"
    );
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_connection_that_sent_nothing_is_closed_at_shutdown_and_the_server_exits_0() {
    let (mut client, handle, run) = serve_one();
    // Let the server accept the connection and start waiting for its first bytes.
    tokio::time::sleep(Duration::from_millis(10)).await;
    handle.request_shutdown();
    let waited = closed_after(&mut client)
        .await
        .expect("the connection stayed open");
    assert!(
        waited < Duration::from_secs(29),
        "closed only after {waited:?}"
    );
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_request_whose_first_bytes_arrive_one_at_a_time_is_served() {
    let (mut client, handle, run) = serve_one();
    // "P" and "PO" could still be the HTTP/2 preface; "POS" cannot.
    for byte in b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" {
        client.write_all(&[*byte]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut buf = vec![0u8; 1024];
    let n = client.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    assert!(buf[..n].ends_with(b"ok"), "{:?}", &buf[..n]);
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}
