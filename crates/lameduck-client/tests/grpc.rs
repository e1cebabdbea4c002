//! tonic's client under the layer: a trailers-only `UNAVAILABLE` with
//! `grpc-retry-pushback-ms` is waited for and retried when the call is marked or its service
//! configured idempotent, never otherwise; after a GOAWAY, the retry and the calls after it go
//! on a new connection while the old one still finishes its call in flight.

mod support;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use lameduck_client::{RetryLayer, RetryReason, Retryable};
use support::{bounded, counting_server, grpc_serving, grpc_unavailable, Recorder};
use tokio::net::TcpListener;
use tonic::transport::Endpoint;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tower::ServiceBuilder;

fn endpoint(addr: std::net::SocketAddr) -> Endpoint {
    Endpoint::from_shared(format!("http://{addr}")).unwrap()
}

fn check(marked: bool) -> tonic::Request<HealthCheckRequest> {
    let mut r = tonic::Request::new(HealthCheckRequest::default());
    if marked {
        r.extensions_mut().insert(Retryable);
    }
    r
}

#[tokio::test]
async fn health_client_over_a_layered_channel() {
    let (addr, seen) = counting_server(Arc::new(|_, _| grpc_serving())).await;
    let channel = endpoint(addr).connect_lazy();
    let mut client = HealthClient::new(
        ServiceBuilder::new()
            .layer(RetryLayer::default())
            .service(channel),
    );
    let r = bounded(client.check(check(false))).await.unwrap();
    assert_eq!(r.into_inner().status, 1, "SERVING");
    assert_eq!(seen.requests(), 1);
}

#[tokio::test]
async fn unavailable_with_pushback_is_retried_for_marked_calls_only() {
    // The first two calls get UNAVAILABLE with a pushback of 1 s.
    let (addr, seen) = counting_server(Arc::new(|n, _| {
        if n < 2 {
            grpc_unavailable("1000")
        } else {
            grpc_serving()
        }
    }))
    .await;
    let timer = Recorder::default();
    let layer = RetryLayer::builder().timer(timer.clone()).build().unwrap();
    let stats = layer.stats();
    let channel = endpoint(addr).connect_lazy();
    let mut client = HealthClient::new(ServiceBuilder::new().layer(layer).service(channel));
    let status = bounded(client.check(check(false)))
        .await
        .expect_err("an unmarked call is not retried");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(seen.received(), 1);
    let r = bounded(client.check(check(true))).await.expect("retried");
    assert_eq!(r.into_inner().status, 1);
    assert_eq!(seen.received(), 3);
    assert_eq!(timer.waits(), vec![Duration::from_secs(1)]);
    assert_eq!(stats.retries(RetryReason::Pushback), 1);
}

#[tokio::test]
async fn a_service_configured_idempotent_is_retried_unmarked() {
    let (addr, seen) = counting_server(Arc::new(|n, _| {
        if n == 0 {
            grpc_unavailable("0")
        } else {
            grpc_serving()
        }
    }))
    .await;
    let layer = RetryLayer::builder()
        .idempotent_grpc_service("grpc.health.v1.Health")
        .build()
        .unwrap();
    let channel = endpoint(addr).connect_lazy();
    let mut client = HealthClient::new(ServiceBuilder::new().layer(layer).service(channel));
    let r = bounded(client.check(check(false))).await.expect("retried");
    assert_eq!(r.into_inner().status, 1);
    assert_eq!(seen.received(), 2);
}

/// An h2c gRPC server whose first connection says GOAWAY (hyper's graceful shutdown) as soon
/// as its first call arrives, and answers that call 500 ms later (the connection stays open
/// meanwhile); every other call is answered at once. Counts connections and calls answered.
async fn goaway_with_a_call_in_flight() -> (std::net::SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>)
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let (c, a) = (connections.clone(), answered.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let index = c.fetch_add(1, Ordering::SeqCst);
            let a = a.clone();
            tokio::spawn(async move {
                let first = Arc::new(tokio::sync::Notify::new());
                let calls = Arc::new(AtomicUsize::new(0));
                let f = first.clone();
                let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
                    let (f, a, calls) = (f.clone(), a.clone(), calls.clone());
                    async move {
                        if index == 0 && calls.fetch_add(1, Ordering::SeqCst) == 0 {
                            f.notify_one();
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                        a.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, Infallible>(grpc_serving())
                    }
                });
                let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service);
                let mut conn = std::pin::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => return,
                    _ = first.notified() => conn.as_mut().graceful_shutdown(),
                }
                let _ = conn.await;
            });
        }
    });
    (addr, connections, answered)
}

#[tokio::test]
async fn after_a_goaway_the_retry_goes_on_a_new_connection() {
    let (addr, connections, answered) = goaway_with_a_call_in_flight().await;
    let layer = RetryLayer::builder()
        .timer(Recorder::default())
        .build()
        .unwrap();
    let stats = layer.stats();
    let channel = endpoint(addr).connect_lazy();
    let client = HealthClient::new(ServiceBuilder::new().layer(layer).service(channel));
    let mut slow = client.clone();
    let slow = tokio::spawn(async move { slow.check(check(false)).await });
    tokio::time::sleep(Duration::from_millis(150)).await; // the GOAWAY has come
    for _ in 0..3 {
        let r = bounded(client.clone().check(check(false)))
            .await
            .expect("served");
        assert_eq!(r.into_inner().status, 1);
    }
    // The old connection is still open, its call in flight, while these were served.
    assert_eq!(answered.load(Ordering::SeqCst), 3);
    assert_eq!(connections.load(Ordering::SeqCst), 2, "one new connection");
    let refused = stats.retries(RetryReason::Refused) + stats.retries(RetryReason::Unsent);
    assert_eq!(
        refused, 1,
        "only the first call met the old connection: {stats:?}"
    );
    bounded(slow)
        .await
        .unwrap()
        .expect("the call in flight finished");
    assert_eq!(answered.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn after_a_goaway_tonic_alone_fails_the_first_call() {
    let (addr, connections, _) = goaway_with_a_call_in_flight().await;
    let channel = endpoint(addr).connect_lazy();
    let client = HealthClient::new(channel);
    let mut slow = client.clone();
    let slow = tokio::spawn(async move { slow.check(check(false)).await });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let status = bounded(client.clone().check(check(false)))
        .await
        .expect_err("cancelled on the closing connection");
    let source = std::error::Error::source(&status).expect("a transport error");
    let reason = lameduck_client::classify_error(source);
    assert!(
        matches!(reason, Some(RetryReason::Unsent | RetryReason::Refused)),
        "{status:?}"
    );
    // tonic's Channel then drops the connection: the next call goes on a new one.
    bounded(client.clone().check(check(false)))
        .await
        .expect("served");
    assert_eq!(connections.load(Ordering::SeqCst), 2);
    bounded(slow)
        .await
        .unwrap()
        .expect("the call in flight finished");
}
