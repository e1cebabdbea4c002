//! HTTP/1 through hyper-util's client: a reused keep-alive connection closed before any byte
//! of the response is retried for idempotent and marked requests, never for others; a
//! refused connection is retried for every method.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use lameduck_client::{classify_error, RetryLayer, RetryReason, Retryable, SkipReason};
use support::{bounded, client, Recorder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::{ServiceBuilder, ServiceExt};

/// Reads one request (head and `Content-Length` body) from `stream`; false at its end.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                buf.drain(..end + 4 + len);
                return true;
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A keep-alive server whose first connection answers its first request, then reads the
/// second and closes without a byte of response (an idle close racing the request); every
/// later connection answers every request. Counts the requests it answered.
async fn closes_the_reused_connection() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answered = Arc::new(AtomicUsize::new(0));
    let a = answered.clone();
    tokio::spawn(async move {
        let mut index = 0;
        while let Ok((mut stream, _)) = listener.accept().await {
            let (a, first) = (a.clone(), index == 0);
            index += 1;
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut n = 0;
                while read_request(&mut stream, &mut buf).await {
                    if first && n == 1 {
                        return; // closed before any byte of the response
                    }
                    n += 1;
                    a.fetch_add(1, Ordering::SeqCst);
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if stream.write_all(ok).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, answered)
}

fn request(addr: SocketAddr, method: &str, marked: bool) -> Request<Full<Bytes>> {
    let mut r = Request::builder()
        .method(method)
        .uri(format!("http://{addr}/"))
        .body(Full::new(Bytes::from_static(b"body")))
        .unwrap();
    if marked {
        r.extensions_mut().insert(Retryable);
    }
    r
}

/// Sends `method` twice through a layered client (the second on the reused connection that
/// the server closes under it); the second's result and the layer's stats.
async fn second_on_a_closed_connection(
    method: &str,
    marked: bool,
) -> (
    Result<http::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error>,
    lameduck_client::RetryStats,
    Arc<AtomicUsize>,
) {
    let (addr, answered) = closes_the_reused_connection().await;
    let layer = RetryLayer::builder()
        .timer(Recorder::default())
        .build()
        .unwrap();
    let stats = layer.stats();
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(client::<Full<Bytes>>(false));
    let first = bounded(svc.clone().oneshot(request(addr, method, marked)))
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    first.into_body().collect().await.unwrap(); // back in the pool
    let second = bounded(svc.oneshot(request(addr, method, marked))).await;
    (second, stats, answered)
}

#[tokio::test]
async fn an_idempotent_request_is_retried_on_a_new_connection() {
    let (second, stats, answered) = second_on_a_closed_connection("PUT", false).await;
    assert_eq!(second.expect("retried").status(), 200);
    assert_eq!(answered.load(Ordering::SeqCst), 2);
    assert_eq!(stats.retries(RetryReason::Closed), 1);
}

#[tokio::test]
async fn a_post_is_not_retried_unless_marked() {
    let (second, stats, answered) = second_on_a_closed_connection("POST", false).await;
    let error = second.expect_err("returned as it came");
    assert_eq!(
        classify_error(&error),
        Some(RetryReason::Closed),
        "{error:?}"
    );
    assert_eq!(answered.load(Ordering::SeqCst), 1);
    assert_eq!(stats.skipped_by_reason()[2], (SkipReason::NotIdempotent, 1));

    let (second, stats, answered) = second_on_a_closed_connection("POST", true).await;
    assert_eq!(second.expect("retried").status(), 200);
    assert_eq!(answered.load(Ordering::SeqCst), 2);
    assert_eq!(stats.retries(RetryReason::Closed), 1);
}

#[tokio::test]
async fn a_refused_connection_is_retried_for_every_method() {
    // A port nobody listens on, then a server on it: the first attempt is refused.
    let probe = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let timer = Recorder::default();
    let waits = timer.waits.clone();
    let layer = RetryLayer::builder().timer(timer).build().unwrap();
    let stats = layer.stats();
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(client::<Full<Bytes>>(false));
    let error = bounded(svc.clone().oneshot(request(addr, "POST", false)))
        .await
        .expect_err("nobody listens");
    assert_eq!(classify_error(&error), Some(RetryReason::Connect));
    assert_eq!(
        stats.retries(RetryReason::Connect),
        2,
        "every attempt refused"
    );
    assert_eq!(stats.exhausted(RetryReason::Connect), 1);
    let waits = waits.lock().unwrap().clone();
    assert_eq!(waits.len(), 2);
    assert!(
        waits[0] >= std::time::Duration::from_millis(10),
        "{waits:?}"
    );
    assert!(
        waits[1] >= std::time::Duration::from_millis(20),
        "backoff doubles: {waits:?}"
    );
}
