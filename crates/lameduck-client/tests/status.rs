//! `429` and `503` with `Retry-After`: waited for as told (tokio's paused clock), up to the
//! maximum, for idempotent or marked requests only; the maximum of attempts, the budget, and
//! bodies that are never replayed.

mod support;

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{Empty, Full, StreamBody};
use lameduck_client::{RetryLayer, RetryReason, Retryable, SkipReason};
use support::{answer, bounded, client, counting_server, Recorder, ID};
use tower::{service_fn, Service, ServiceBuilder, ServiceExt};

/// A service that answers its first `n` calls with `status` and `retry_after`, then 200;
/// counts its calls.
fn rejecting(
    n: usize,
    status: u16,
    retry_after: &'static str,
) -> (impl Rejecting, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let svc = service_fn(move |_req: Request<Empty<Bytes>>| {
        let k = c.fetch_add(1, Ordering::SeqCst);
        async move {
            let mut r = Response::new(Empty::new());
            if k < n {
                *r.status_mut() = StatusCode::from_u16(status).unwrap();
                r.headers_mut()
                    .insert("retry-after", retry_after.parse().unwrap());
            }
            Ok::<_, io::Error>(r)
        }
    });
    (svc, calls)
}

/// The service `rejecting` makes.
trait Rejecting:
    tower::Service<
        Request<Empty<Bytes>>,
        Response = Response<Empty<Bytes>>,
        Error = io::Error,
        Future: Send,
    > + Clone
{
}

impl<S> Rejecting for S where
    S: tower::Service<
            Request<Empty<Bytes>>,
            Response = Response<Empty<Bytes>>,
            Error = io::Error,
            Future: Send,
        > + Clone
{
}

fn get() -> Request<Empty<Bytes>> {
    Request::get("http://127.0.0.1/")
        .body(Empty::new())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn retry_after_seconds_is_waited_for_as_told() {
    let (svc, calls) = rejecting(1, 429, "2");
    let layer = RetryLayer::default();
    let stats = layer.stats();
    let started = tokio::time::Instant::now();
    let r = ServiceBuilder::new()
        .layer(layer)
        .service(svc)
        .oneshot(get())
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(stats.retries(RetryReason::RetryAfter), 1);
}

#[tokio::test]
async fn retry_after_as_an_http_date() {
    let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3));
    let at: &'static str = Box::leak(at.into_boxed_str());
    let (svc, calls) = rejecting(1, 503, at);
    let timer = Recorder::default();
    let layer = RetryLayer::builder().timer(timer.clone()).build().unwrap();
    let r = ServiceBuilder::new()
        .layer(layer)
        .service(svc)
        .oneshot(get())
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let waits = timer.waits();
    assert_eq!(waits.len(), 1);
    assert!(
        waits[0] > Duration::from_secs(1) && waits[0] <= Duration::from_secs(3),
        "{waits:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_longer_than_the_maximum_is_returned_as_it_came() {
    let (svc, calls) = rejecting(1, 429, "60");
    let layer = RetryLayer::builder()
        .max_wait(Duration::from_secs(10))
        .build()
        .unwrap();
    let stats = layer.stats();
    let r = ServiceBuilder::new()
        .layer(layer)
        .service(svc)
        .oneshot(get())
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(stats.skipped_by_reason()[3], (SkipReason::WaitTooLong, 1));
}

#[tokio::test(start_paused = true)]
async fn the_maximum_of_attempts() {
    let (svc, calls) = rejecting(usize::MAX, 503, "1");
    let layer = RetryLayer::builder().max_attempts(4).build().unwrap();
    let stats = layer.stats();
    let r = ServiceBuilder::new()
        .layer(layer)
        .service(svc)
        .oneshot(get())
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(stats.retries(RetryReason::RetryAfter), 3);
    assert_eq!(stats.exhausted(RetryReason::RetryAfter), 1);
}

#[tokio::test(start_paused = true)]
async fn the_budget_bounds_the_extra_load() {
    // Retries up to half the requests of the window, no reserve.
    let (svc, calls) = rejecting(usize::MAX, 503, "0");
    let layer = RetryLayer::builder()
        .max_attempts(10)
        .budget(Duration::from_secs(10), 0, 0.5)
        .build()
        .unwrap();
    let stats = layer.stats();
    let svc = ServiceBuilder::new().layer(layer).service(svc);
    for _ in 0..20 {
        let r = svc.clone().oneshot(get()).await.unwrap();
        assert_eq!(r.status(), 503);
    }
    let retries = stats.retries(RetryReason::RetryAfter);
    assert!(
        (1..=10).contains(&retries),
        "{retries} retries for 20 requests"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 20 + retries as usize);
    assert!(stats.skipped_by_reason()[0].1 >= 10, "{stats:?}");

    // Without a budget, only the attempts bound them.
    let (svc, calls) = rejecting(usize::MAX, 503, "0");
    let layer = RetryLayer::builder()
        .max_attempts(10)
        .unlimited_budget()
        .build()
        .unwrap();
    let svc = ServiceBuilder::new().layer(layer).service(svc);
    for _ in 0..20 {
        svc.clone().oneshot(get()).await.unwrap();
    }
    assert_eq!(calls.load(Ordering::SeqCst), 200);
}

/// A POST of `body` to the counting server at `addr`, with id `id`, marked or not.
fn post<B>(addr: std::net::SocketAddr, id: &str, body: B, marked: bool) -> Request<B> {
    let mut r = Request::post(format!("http://{addr}/orders"))
        .header(ID, id)
        .body(body)
        .unwrap();
    if marked {
        r.extensions_mut().insert(Retryable);
    }
    r
}

#[tokio::test]
async fn a_post_is_retried_on_429_only_when_marked() {
    // The first two requests are answered 429 Retry-After: 0, the others 200.
    let (addr, seen) = counting_server(Arc::new(|n, _req| {
        if n < 2 {
            answer(429, &[("retry-after", "0")])
        } else {
            answer(200, &[])
        }
    }))
    .await;
    let layer = RetryLayer::default();
    let stats = layer.stats();
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(client::<Full<Bytes>>(false));
    let body = || Full::new(Bytes::from_static(b"{\"item\":1}"));
    let r = bounded(svc.clone().oneshot(post(addr, "unmarked", body(), false)))
        .await
        .unwrap();
    assert_eq!(r.status(), 429, "a POST without the marker is not retried");
    assert_eq!(seen.received(), 1);
    assert_eq!(stats.skipped_by_reason()[2], (SkipReason::NotIdempotent, 1));
    let r = bounded(svc.clone().oneshot(post(addr, "marked", body(), true)))
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "a marked POST is retried");
    assert_eq!(seen.received(), 3);
    assert_eq!(seen.times("marked"), 1);
    assert_eq!(stats.retries(RetryReason::RetryAfter), 1);
    seen.assert_never_twice();
}

#[tokio::test]
async fn bodies_not_known_whole_are_never_replayed() {
    let (addr, seen) = counting_server(Arc::new(|_, _| answer(503, &[("retry-after", "0")]))).await;
    let layer = RetryLayer::builder().body_limit(16).build().unwrap();
    let stats = layer.stats();

    // A stream whose frames are not ready when the request is made.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, io::Error>>(2);
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
    let body = UnsyncBoxBody::new(StreamBody::new(stream));
    let mut svc = ServiceBuilder::new()
        .layer(layer.clone())
        .service(client::<UnsyncBoxBody<Bytes, io::Error>>(true));
    // Called now, before its first frame is ready.
    let call = svc
        .ready()
        .await
        .unwrap()
        .call(post(addr, "stream", body, true));
    let call = tokio::spawn(call);
    tx.send(Ok(Frame::data(Bytes::from_static(b"chunk"))))
        .await
        .unwrap();
    drop(tx);
    let r = bounded(call).await.unwrap().unwrap();
    assert_eq!(r.status(), 503, "returned as it came");
    assert_eq!(seen.received(), 1);

    // A body known whole, over the limit.
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(client::<Full<Bytes>>(true));
    let big = Full::new(Bytes::from(vec![b'x'; 17]));
    let r = bounded(svc.oneshot(post(addr, "big", big, true)))
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(seen.received(), 2);
    assert_eq!(stats.skipped_by_reason()[1], (SkipReason::Body, 2));
}
