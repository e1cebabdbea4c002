//! The request timeout: a request past it gets 504, a streamed response is aborted at it
//! (counted from admission), and both are released from the gate; long-running bodies are
//! not bounded by it.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use tower::{service_fn, Layer, ServiceExt};

use crate::config;
use crate::support::builder;

#[tokio::test(start_paused = true)]
async fn a_request_past_the_timeout_gets_504_and_is_released() {
    let server = builder(config(|c| c.request_timeout(Duration::from_secs(2)))).prepare();
    let svc = server
        .admission_layer()
        .layer(service_fn(|_req: Request<Empty<Bytes>>| async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"late"))))
        }));
    let started = tokio::time::Instant::now();
    let res = svc.oneshot(Request::new(Empty::new())).await.unwrap();
    assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(
        started.elapsed() >= Duration::from_secs(2) && started.elapsed() < Duration::from_secs(3)
    );
    let body = res.into_body().collect().await.unwrap().to_bytes();
    assert!(std::str::from_utf8(&body).unwrap().contains("Timeout"));
    assert_eq!(server.shared().gate().normal_in_flight(), 0);
}

/// A body that sends one line at once and then never ends.
fn endless_stream() -> http_body_util::StreamBody<
    impl futures_util::Stream<Item = Result<http_body::Frame<Bytes>, Infallible>> + Send,
> {
    use futures_util::StreamExt;
    let first = futures_util::stream::once(async {
        Ok::<_, Infallible>(http_body::Frame::data(Bytes::from_static(b"line\n")))
    });
    http_body_util::StreamBody::new(first.chain(futures_util::stream::pending()))
}

#[tokio::test(start_paused = true)]
async fn a_streamed_response_is_aborted_at_the_request_timeout_and_released() {
    let server = builder(config(|c| c.request_timeout(Duration::from_secs(2)))).prepare();
    let svc = server
        .admission_layer()
        .layer(service_fn(|_req: Request<Empty<Bytes>>| async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            Ok::<_, Infallible>(Response::new(endless_stream()))
        }));
    let started = tokio::time::Instant::now();
    let res = svc.oneshot(Request::new(Empty::new())).await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "the head is sent before the deadline"
    );
    assert_eq!(server.shared().gate().normal_in_flight(), 1);
    let mut body = Box::pin(res.into_body());
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), Bytes::from_static(b"line\n"));
    // The deadline counts from admission: 2 s after the request, not after the head.
    let end = body.frame().await.unwrap();
    let err = end.expect_err("the body ends with an error, which aborts the response");
    assert!(err.is::<lameduck_hyper::ResponseTimedOut>(), "{err}");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_millis(2010),
        "{elapsed:?}"
    );
    assert_eq!(
        server.shared().gate().normal_in_flight(),
        0,
        "released at the deadline"
    );
}

#[tokio::test(start_paused = true)]
async fn long_running_bodies_are_not_bounded_by_the_request_timeout() {
    let server = builder(config(|c| c.request_timeout(Duration::from_secs(1)))).prepare();
    let svc = server
        .admission_layer()
        .layer(service_fn(|_req: Request<Empty<Bytes>>| async {
            Ok::<_, Infallible>(Response::new(endless_stream()))
        }));
    let req = Request::builder()
        .uri("/x?watch=true")
        .body(Empty::new())
        .unwrap();
    let mut body = Box::pin(svc.oneshot(req).await.unwrap().into_body());
    assert!(body.frame().await.unwrap().is_ok());
    let next = tokio::time::timeout(Duration::from_secs(30), body.frame()).await;
    assert!(next.is_err(), "still streaming 30 s later: {next:?}");
    assert_eq!(server.shared().gate().long_running_in_flight(), 1);
}
