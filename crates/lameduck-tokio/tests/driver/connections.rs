//! A connection's own bounds and pace: a request head that never completes is closed after
//! the header-read timeout (per head, not per connection), and a service that is not ready
//! yet is waited for.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use lameduck::Config;

use crate::support::{self, builder, OneConnection};
use crate::{serve_api, RunningServer};

#[tokio::test(start_paused = true)]
async fn a_request_head_that_never_completes_is_closed_after_the_header_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut client, server_io) = tokio::io::duplex(4096);
    let RunningServer { handle, run, .. } = serve_api(
        builder(Config::default()),
        OneConnection(Some(server_io)),
        support::service("ok"),
    )
    .start();
    // A keep-alive request is served; then the next head starts and never completes.
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 1024];
    let n = client.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    // 20 s idle and a complete request: still served (the timeout is per head).
    tokio::time::sleep(Duration::from_secs(20)).await;
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let n = client.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    client.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
    let started = tokio::time::Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the slow head was not cut");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(29) && waited <= Duration::from_secs(31),
        "closed {waited:?} after the partial head"
    );
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

/// A service that is not ready when first asked (it wakes its caller at once), and whose
/// readiness each call uses up: every other request waits for readiness.
#[derive(Clone, Default)]
struct ReadyEveryOtherTime {
    ready: bool,
    not_ready_answers: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl tower::Service<Request<hyper::body::Incoming>> for ReadyEveryOtherTime {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        if self.ready {
            return std::task::Poll::Ready(Ok(()));
        }
        self.ready = true;
        self.not_ready_answers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }

    fn call(&mut self, _req: Request<hyper::body::Incoming>) -> Self::Future {
        assert!(self.ready, "called without readiness");
        self.ready = false;
        std::future::ready(Ok(Response::new(Full::new(Bytes::from_static(b"ok")))))
    }
}

/// [`ReadyEveryOtherTime`] with a small (boxed) future: the server admits the request and
/// calls the service as soon as hyper hands it over, and a request that finds the service not
/// ready waits in a slot of its own until it is.
#[derive(Clone, Default)]
struct SmallFutureReadyEveryOtherTime(ReadyEveryOtherTime);

type BoxedResponse = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send>,
>;

impl tower::Service<Request<hyper::body::Incoming>> for SmallFutureReadyEveryOtherTime {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = BoxedResponse;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        tower::Service::poll_ready(&mut self.0, cx)
    }

    fn call(&mut self, req: Request<hyper::body::Incoming>) -> Self::Future {
        Box::pin(self.0.call(req))
    }
}

#[tokio::test(start_paused = true)]
async fn a_service_that_is_not_ready_yet_is_waited_for() {
    let service = ReadyEveryOtherTime::default();
    let not_ready = std::sync::Arc::clone(&service.not_ready_answers);
    not_ready_service_is_waited_for(service, not_ready).await;
}

#[tokio::test(start_paused = true)]
async fn a_service_with_a_small_future_that_is_not_ready_yet_is_waited_for() {
    let service = SmallFutureReadyEveryOtherTime::default();
    let not_ready = std::sync::Arc::clone(&service.0.not_ready_answers);
    not_ready_service_is_waited_for(service, not_ready).await;
}

/// Four requests on one connection to `service`, which answers `not_ready` at least twice.
async fn not_ready_service_is_waited_for(
    service: impl lameduck_tokio::HttpService,
    not_ready: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut client, server_io) = tokio::io::duplex(4096);
    let prepared = serve_api(
        builder(Config::default()),
        OneConnection(Some(server_io)),
        service,
    );
    let shared = prepared.server.shared().clone();
    let RunningServer { handle, run, .. } = prepared.start();
    let mut buf = vec![0u8; 1024];
    for _ in 0..4 {
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let n = client.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    }
    assert!(not_ready.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    assert_eq!(shared.gate().normal_in_flight(), 0);
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}
