//! HTTP/2 through hyper-util's client: what the server provably did not process is retried
//! (a stream above a GOAWAY's last-stream-id, `REFUSED_STREAM`), on any method; a response
//! that began is never retried; after a GOAWAY the pool moves to a new connection.

mod support;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use lameduck_client::{classify_error, RetryLayer, RetryReason};
use support::raw_h2::{raw_h2_server, Script};
use support::{bounded, client, get, Recorder};
use tokio::net::TcpListener;
use tower::{ServiceBuilder, ServiceExt};

fn layer() -> RetryLayer {
    RetryLayer::builder()
        .timer(Recorder::default())
        .build()
        .unwrap()
}

/// Waits until `f()` holds, every 10 ms, for at most 10 s.
async fn until(f: impl Fn() -> bool) {
    bounded(async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_stream_above_the_goaway_is_retried_on_a_new_connection() {
    let (addr, seen) = raw_h2_server(Script::GoawayBelow).await;
    let layer = layer();
    let stats = layer.stats();
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(client::<Empty<Bytes>>(true));
    let first = tokio::spawn(svc.clone().oneshot(get(addr, "/a", "a")));
    until(|| seen.connections() == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // stream 1 is held by now
    let second = bounded(svc.clone().oneshot(get(addr, "/b", "b")))
        .await
        .expect("retried");
    assert_eq!(second.status(), 200);
    let first = bounded(first).await.unwrap().expect("stream 1 answered");
    assert_eq!(first.status(), 200);
    assert_eq!(seen.processed(), 2, "each request processed once");
    assert_eq!(seen.connections(), 2, "the retry went on a new connection");
    assert_eq!(stats.retries(RetryReason::Refused), 1);
}

#[tokio::test]
async fn without_the_layer_the_stream_above_the_goaway_fails() {
    let (addr, seen) = raw_h2_server(Script::GoawayBelow).await;
    let client = client::<Empty<Bytes>>(true);
    let first = tokio::spawn(client.request(get(addr, "/a", "a")));
    until(|| seen.connections() == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let error = bounded(client.request(get(addr, "/b", "b")))
        .await
        .expect_err("refused by the GOAWAY");
    assert_eq!(
        classify_error(&error),
        Some(RetryReason::Refused),
        "{error:?}"
    );
    bounded(first).await.unwrap().expect("stream 1 answered");
    assert_eq!(seen.processed(), 1);
}

#[tokio::test]
async fn refused_stream_is_retried_whatever_the_method() {
    let (addr, seen) = raw_h2_server(Script::RefusedStream).await;
    let layer = layer();
    let stats = layer.stats();
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(client::<Full<Bytes>>(true));
    let post = Request::post(format!("http://{addr}/orders"))
        .body(Full::new(Bytes::from_static(b"one order")))
        .unwrap();
    let response = bounded(svc.oneshot(post)).await.expect("retried");
    assert_eq!(response.status(), 200);
    assert_eq!(seen.processed(), 1);
    assert_eq!(stats.retries(RetryReason::RefusedStream), 1);
}

#[tokio::test]
async fn a_response_that_began_is_never_retried() {
    let (addr, seen) = raw_h2_server(Script::BeganThenReset).await;
    let layer = layer();
    let stats = layer.stats();
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(client::<Empty<Bytes>>(true));
    let response = bounded(svc.oneshot(get(addr, "/", "x")))
        .await
        .expect("the head came");
    assert_eq!(response.status(), 200);
    let body = bounded(response.into_body().collect()).await;
    assert!(body.is_err(), "the body's reset is the caller's");
    assert_eq!(seen.processed(), 1);
    assert_eq!(seen.connections(), 1);
    assert!(stats.retries_by_reason().iter().all(|(_, n)| *n == 0));
}

/// An h2c server that answers each request with 200 and then says GOAWAY (hyper's graceful
/// shutdown) on that connection; counts connections.
async fn goaway_after_each_response() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let c = connections.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let answered = Arc::new(tokio::sync::Notify::new());
                let a = answered.clone();
                let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
                    let a = a.clone();
                    async move {
                        a.notify_one();
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                    }
                });
                let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service);
                let mut conn = std::pin::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => return,
                    _ = answered.notified() => conn.as_mut().graceful_shutdown(),
                }
                let _ = conn.await;
            });
        }
    });
    (addr, connections)
}

#[tokio::test]
async fn hyper_util_pool_leaves_a_goawayed_connection_by_itself() {
    let (addr, connections) = goaway_after_each_response().await;
    // No layer: the pool alone moves the next request to a new connection.
    let client = client::<Empty<Bytes>>(true);
    for i in 0..3 {
        let r = bounded(client.request(get(addr, "/", &i.to_string())))
            .await
            .expect("served");
        assert_eq!(r.status(), 200);
        let _ = r.into_body().collect().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        3,
        "one connection per GOAWAY"
    );
}
