//! The tokio driver and admission layer under tokio's paused clock: every duration here is
//! virtual, so the tests are exact and instant.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;
use lameduck::{Config, LifecycleSignal};
use lameduck_hyper::{Listener, ServeError};
use lameduck_tokio::{
    AdmissionLayer, Builder, Handle, HttpService, Server, ShutdownNotice, TokioRuntime,
};
use tokio::io::DuplexStream;
use tokio::task::JoinHandle;
use tower::{service_fn, Layer, ServiceExt};

mod support;
use support::OneConnection;

/// A listener that never accepts: the driver's own behaviour, without sockets.
struct IdleListener;

impl Listener for IdleListener {
    type Io = TokioIo<DuplexStream>;

    async fn accept(&mut self) -> io::Result<(Self::Io, SocketAddr)> {
        std::future::pending().await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(([127, 0, 0, 1], 1).into())
    }
}

/// The default configuration changed by `f`.
fn config(f: impl FnOnce(lameduck::ConfigBuilder) -> lameduck::ConfigBuilder) -> Config {
    f(Config::builder()).build().unwrap()
}

/// Starts configuring a server on tokio that installs no OS signal handlers: the tests
/// deliver their signals through its [`Handle`].
fn builder_without_signals(config: Config) -> Builder<TokioRuntime> {
    let mut builder = lameduck_tokio::builder(config);
    builder.without_signals();
    builder
}

/// A prepared server with one listener, "api", and what a test keeps of it once `run`
/// consumes it: its handle and its admission layer.
struct PreparedServer {
    server: Server<TokioRuntime>,
    handle: Handle,
    layer: AdmissionLayer<TokioRuntime>,
}

/// A server whose `run` is spawned: its handle, its admission layer, and the task that
/// returns its exit code.
struct RunningServer {
    handle: Handle,
    layer: AdmissionLayer<TokioRuntime>,
    run: JoinHandle<Result<u8, ServeError>>,
}

impl PreparedServer {
    /// Spawns the server's `run`.
    fn start(self) -> RunningServer {
        RunningServer {
            handle: self.handle,
            layer: self.layer,
            run: tokio::spawn(self.server.run()),
        }
    }
}

/// Prepares the server `builder` configured, serving `service` on `listener` as "api".
fn serve_api(
    builder: Builder<TokioRuntime>,
    listener: impl Listener,
    service: impl HttpService,
) -> PreparedServer {
    let mut server = builder.prepare();
    let layer = server.admission_layer();
    server.serve("api", listener, service).unwrap();
    let handle = server.handle();
    PreparedServer {
        server,
        handle,
        layer,
    }
}

/// Prepares the server `builder` configured, serving "api" on an [`IdleListener`]: the
/// lifecycle without connections.
fn serve_idle_api(builder: Builder<TokioRuntime>) -> PreparedServer {
    serve_api(builder, IdleListener, support::service("ok"))
}

#[tokio::test(start_paused = true)]
async fn not_accepting_waits_for_the_delay_and_a_slow_hook_then_exits_0() {
    let mut builder = builder_without_signals(config(|c| c.shutdown_delay(Duration::from_secs(5))));
    builder
        .pre_shutdown_hook("slow", || async {
            tokio::time::sleep(Duration::from_secs(7)).await;
            Ok::<_, Infallible>(())
        })
        .unwrap();
    let RunningServer { handle, run, .. } = serve_idle_api(builder).start();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(handle.request_shutdown());
    assert_eq!(run.await.unwrap().unwrap(), 0);
    let shared = handle.shared();
    let t0 = shared.fired_at(LifecycleSignal::ShutdownInitiated).unwrap();
    let delay = shared
        .fired_at(LifecycleSignal::AfterShutdownDelayDuration)
        .unwrap()
        - t0;
    let n = shared
        .fired_at(LifecycleSignal::NotAcceptingNewRequest)
        .unwrap()
        - t0;
    // Virtual time: exact up to the scheduler's millisecond rounding.
    assert!(
        delay >= Duration::from_secs(5) && delay < Duration::from_millis(5010),
        "{delay:?}"
    );
    assert!(
        n >= Duration::from_secs(7) && n < Duration::from_millis(7010),
        "{n:?}"
    );
    for s in [
        LifecycleSignal::InFlightRequestsDrained,
        LifecycleSignal::HTTPServerStoppedListening,
    ] {
        assert!(shared.has_fired(s), "{s}");
    }
}

#[tokio::test(start_paused = true)]
async fn failing_and_panicking_hooks_still_drain_and_exit_1() {
    for panic in [false, true] {
        let mut builder = builder_without_signals(Config::default());
        builder
            .pre_shutdown_hook("bad", move || async move {
                if panic {
                    panic!("hook panicked on purpose");
                }
                Err::<(), _>("hook failed on purpose")
            })
            .unwrap();
        let RunningServer { handle, run, .. } = serve_idle_api(builder).start();
        handle.request_shutdown();
        assert_eq!(run.await.unwrap().unwrap(), 1, "panic = {panic}");
        assert!(handle
            .shared()
            .has_fired(LifecycleSignal::InFlightRequestsDrained));
    }
}

#[tokio::test(start_paused = true)]
async fn a_second_signal_exits_1_at_once() {
    let builder = builder_without_signals(config(|c| c.shutdown_delay(Duration::from_secs(60))));
    let RunningServer { handle, run, .. } = serve_idle_api(builder).start();
    handle.deliver_os_signal();
    tokio::time::sleep(Duration::from_secs(1)).await;
    handle.deliver_os_signal();
    let started = tokio::time::Instant::now();
    assert_eq!(run.await.unwrap().unwrap(), 1);
    assert!(started.elapsed() < Duration::from_millis(10));
    assert!(!handle
        .shared()
        .has_fired(LifecycleSignal::NotAcceptingNewRequest));
}

#[tokio::test(start_paused = true)]
async fn installing_the_signal_handler_twice_is_an_error() {
    // The first server installs the signal handler.
    let first = lameduck_tokio::builder(Config::default());
    let RunningServer { handle, run, .. } = serve_idle_api(first).start();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let second = lameduck_tokio::builder(Config::default()).prepare();
    assert!(matches!(
        second.run().await,
        Err(ServeError::SignalsAlreadyInstalled)
    ));
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_request_past_the_timeout_gets_504_and_is_released() {
    let server =
        builder_without_signals(config(|c| c.request_timeout(Duration::from_secs(2)))).prepare();
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

#[tokio::test(start_paused = true)]
async fn closed_gate_answers_503_in_close_listener_mode_and_429_in_retry_after_mode_but_serves_health(
) {
    for retry_after_mode in [false, true] {
        let builder =
            builder_without_signals(config(|c| c.shutdown_send_retry_after(retry_after_mode)));
        let RunningServer { handle, layer, run } = serve_idle_api(builder).start();
        handle.request_shutdown();
        assert_eq!(run.await.unwrap().unwrap(), 0);
        let svc = layer.layer(service_fn(|_req: Request<Empty<Bytes>>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
        }));
        let res = svc
            .clone()
            .oneshot(Request::new(Empty::new()))
            .await
            .unwrap();
        let h = res.headers().clone();
        if retry_after_mode {
            assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(h["retry-after"], "5");
            assert_eq!(h["connection"], "close");
            let body = res.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(
                &body[..],
                b"The apiserver is shutting down, please try again later.\n"
            );
        } else {
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(h["retry-after"], "1");
        }
        let health = Request::builder().uri("/livez").body(Empty::new()).unwrap();
        let res = svc.oneshot(health).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }
}

#[tokio::test(start_paused = true)]
async fn long_running_bodies_end_at_the_paced_rate_and_hold_the_drain() {
    let builder = builder_without_signals(config(|c| {
        c.shutdown_watch_termination_grace_period(Duration::from_secs(10))
    }));
    let PreparedServer {
        server,
        handle,
        layer,
    } = serve_idle_api(builder);
    // A stream that ends as soon as the server says so.
    let svc = layer.layer(service_fn(|req: Request<Empty<Bytes>>| async move {
        let signal = req.extensions().get::<ShutdownNotice>().cloned().unwrap();
        let body = http_body_util::StreamBody::new(futures_util::stream::once(async move {
            signal.wait().await;
            Ok::<_, Infallible>(http_body::Frame::data(Bytes::from_static(b"bye\n")))
        }));
        Ok::<_, Infallible>(Response::new(body))
    }));
    let mut ends = Vec::new();
    for _ in 0..4 {
        let req = Request::builder()
            .uri("/x?watch=true")
            .body(Empty::new())
            .unwrap();
        let res = svc.clone().oneshot(req).await.unwrap();
        ends.push(tokio::spawn(async move {
            res.into_body().collect().await.unwrap();
            tokio::time::Instant::now()
        }));
    }
    assert_eq!(
        handle.in_flight(),
        lameduck::InFlight {
            normal: 0,
            long_running: 4
        }
    );
    let run = tokio::spawn(server.run());
    tokio::time::sleep(Duration::from_millis(1)).await;
    handle.request_shutdown();
    let mut at = Vec::new();
    for e in ends {
        at.push(e.await.unwrap());
    }
    at.sort();
    // max(4 / 10 s, 200/s) = 200/s: one end every 5 ms, the first at once.
    let span = at[3] - at[0];
    assert!(
        span >= Duration::from_millis(15) && span <= Duration::from_millis(20),
        "{span:?}"
    );
    assert_eq!(run.await.unwrap().unwrap(), 0);
    assert_eq!(
        handle.in_flight(),
        lameduck::InFlight {
            normal: 0,
            long_running: 0
        }
    );
}

#[tokio::test(start_paused = true)]
async fn an_upgraded_connection_stays_counted_until_its_ticket_drops() {
    let builder = builder_without_signals(config(|c| {
        c.shutdown_watch_termination_grace_period(Duration::from_secs(30))
    }));
    let PreparedServer {
        server,
        handle,
        layer,
    } = serve_idle_api(builder);
    let (ticket_tx, ticket_rx) = tokio::sync::oneshot::channel();
    let ticket_tx = std::sync::Mutex::new(Some(ticket_tx));
    let svc = layer.layer(service_fn(move |req: Request<Empty<Bytes>>| {
        // The one call a WebSocket handler makes: keep the ticket with the upgraded socket.
        let ticket = lameduck_tokio::take_upgrade_ticket(&req);
        if let Some(tx) = ticket_tx.lock().unwrap().take() {
            let _ = tx.send(ticket);
        }
        async {
            let mut res = Response::new(Empty::<Bytes>::new());
            *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            Ok::<_, Infallible>(res)
        }
    }));
    let req = Request::builder()
        .uri("/ws")
        .header("upgrade", "websocket")
        .header("connection", "upgrade")
        .body(Empty::new())
        .unwrap();
    let res = svc.oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::SWITCHING_PROTOCOLS);
    res.into_body().collect().await.unwrap();
    let ticket = ticket_rx
        .await
        .unwrap()
        .expect("an upgrade request carries a ticket");
    // The 101's body ended, but the upgraded connection is still counted.
    assert_eq!(
        handle.in_flight(),
        lameduck::InFlight {
            normal: 0,
            long_running: 1
        }
    );
    // Not running yet: the handle reports the machine's own phase.
    assert_eq!(handle.phase(), lameduck::Phase::Prepared);
    let run = tokio::spawn(server.run());
    handle.request_shutdown();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        handle.phase(),
        lameduck::Phase::Draining,
        "the drain waits for the socket"
    );
    drop(ticket);
    assert_eq!(run.await.unwrap().unwrap(), 0);
    assert_eq!(handle.phase(), lameduck::Phase::Exited);
}

#[tokio::test(start_paused = true)]
async fn unknown_paths_get_503_until_every_route_signal_fired() {
    let mut builder = builder_without_signals(Config::default());
    let crds = builder.routes_signal("crds").unwrap();
    let RunningServer { handle, layer, run } = serve_idle_api(builder).start();
    let svc = layer.layer(service_fn(|req: Request<Empty<Bytes>>| async move {
        let mut res = Response::new(Full::new(Bytes::from_static(b"routed")));
        if req.uri().path() != "/known" {
            *res.status_mut() = StatusCode::NOT_FOUND;
        }
        Ok::<_, Infallible>(res)
    }));
    let get = |path: &'static str| {
        let svc = svc.clone();
        async move {
            let req = Request::builder().uri(path).body(Empty::new()).unwrap();
            svc.oneshot(req).await.unwrap()
        }
    };
    let early = get("/unknown").await;
    assert_eq!(early.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(early.headers()["retry-after"], "5");
    assert_eq!(get("/known").await.status(), StatusCode::OK);
    handle.routes_signal_fired(crds);
    handle
        .signal_fired(LifecycleSignal::MuxAndDiscoveryComplete)
        .await;
    assert_eq!(get("/unknown").await.status(), StatusCode::NOT_FOUND);
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
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
    let server =
        builder_without_signals(config(|c| c.request_timeout(Duration::from_secs(2)))).prepare();
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
    let server =
        builder_without_signals(config(|c| c.request_timeout(Duration::from_secs(1)))).prepare();
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

#[tokio::test(start_paused = true)]
async fn an_exempt_request_in_flight_holds_the_drain() {
    let PreparedServer {
        server,
        handle,
        layer,
    } = serve_idle_api(builder_without_signals(Config::default()));
    let svc = layer.layer(service_fn(|_req: Request<Empty<Bytes>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"metrics"))))
    }));
    // A scrape answered by the application, and a health answer of the layer, both in
    // flight (their bodies not yet read) when the drain starts.
    let scrape = Request::builder()
        .uri("/metrics")
        .body(Empty::new())
        .unwrap();
    let scrape = svc.clone().oneshot(scrape).await.unwrap();
    let health = Request::builder()
        .uri("/readyz?verbose")
        .body(Empty::new())
        .unwrap();
    let health = svc.oneshot(health).await.unwrap();
    assert_eq!(
        handle.in_flight(),
        lameduck::InFlight {
            normal: 2,
            long_running: 0
        }
    );
    let mut run = tokio::spawn(server.run());
    handle.request_shutdown();
    let waited = tokio::time::timeout(Duration::from_secs(5), &mut run).await;
    assert!(waited.is_err(), "the drain waits for the exempt requests");
    let body = scrape.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"metrics");
    let body = health.into_body().collect().await.unwrap().to_bytes();
    assert!(body.ends_with(b"readyz check passed\n"), "{body:?}");
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn destroy_hooks_hold_the_exit_and_a_second_signal_cuts_them_short() {
    for second_signal in [false, true] {
        let mut builder = builder_without_signals(Config::default());
        builder
            .destroy_hook("flush", || async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Ok::<_, Infallible>(())
            })
            .unwrap();
        let RunningServer { handle, run, .. } = serve_idle_api(builder).start();
        handle.deliver_os_signal();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!run.is_finished(), "the exit waits for the destroy hook");
        let started = tokio::time::Instant::now();
        if second_signal {
            handle.deliver_os_signal();
        }
        let code = run.await.unwrap().unwrap();
        let waited = started.elapsed();
        if second_signal {
            assert_eq!(code, 1);
            assert!(waited < Duration::from_millis(10), "{waited:?}");
        } else {
            assert_eq!(code, 0);
            assert!(
                waited >= Duration::from_millis(2890) && waited < Duration::from_millis(2910),
                "{waited:?}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_signal_after_request_shutdown_exits_1() {
    let builder = builder_without_signals(config(|c| c.shutdown_delay(Duration::from_secs(60))));
    let RunningServer { handle, run, .. } = serve_idle_api(builder).start();
    handle.request_shutdown();
    handle.request_shutdown();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !run.is_finished(),
        "repeating request_shutdown() changes nothing"
    );
    handle.deliver_os_signal();
    assert_eq!(run.await.unwrap().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_request_head_that_never_completes_is_closed_after_the_header_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut client, server_io) = tokio::io::duplex(4096);
    let RunningServer { handle, run, .. } = serve_api(
        builder_without_signals(Config::default()),
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

#[tokio::test(start_paused = true)]
async fn a_service_that_is_not_ready_yet_is_waited_for() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut client, server_io) = tokio::io::duplex(4096);
    let service = ReadyEveryOtherTime::default();
    let not_ready = std::sync::Arc::clone(&service.not_ready_answers);
    let prepared = serve_api(
        builder_without_signals(Config::default()),
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

#[tokio::test(start_paused = true)]
async fn event_streams_keep_their_events_until_their_turn_then_send_a_retry_hint() {
    let builder = builder_without_signals(config(|c| {
        c.shutdown_delay(Duration::from_millis(300))
            .shutdown_watch_termination_grace_period(Duration::from_secs(10))
    }));
    let PreparedServer {
        server,
        handle,
        layer,
    } = serve_idle_api(builder);
    // An event every 100 ms, without end.
    let svc = layer.layer(service_fn(|req: Request<Empty<Bytes>>| async move {
        let notice = req.extensions().get::<ShutdownNotice>().cloned();
        let ticks = futures_util::stream::unfold(0u32, |n| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Some((Bytes::from(format!("data: {n}\n\n")), n + 1))
        });
        let events = futures_util::StreamExt::map(
            lameduck_tokio::sse::end_at_turn(TokioRuntime, notice, ticks),
            |e| Ok::<_, Infallible>(http_body::Frame::data(e)),
        );
        Ok::<_, Infallible>(Response::new(http_body_util::StreamBody::new(events)))
    }));
    let started = tokio::time::Instant::now();
    let mut streams = Vec::new();
    for _ in 0..3 {
        let req = Request::builder()
            .uri("/events")
            .header("accept", "text/event-stream")
            .body(Empty::new())
            .unwrap();
        let res = svc.clone().oneshot(req).await.unwrap();
        streams.push(tokio::spawn(async move {
            let mut body = res.into_body();
            let mut events = Vec::new();
            while let Some(frame) = body.frame().await {
                let data = frame.unwrap().into_data().unwrap();
                events.push((tokio::time::Instant::now(), data));
            }
            (events, tokio::time::Instant::now())
        }));
    }
    let run = tokio::spawn(server.run());
    tokio::time::sleep(Duration::from_millis(250)).await;
    handle.request_shutdown();
    let mut ends = Vec::new();
    for s in streams {
        let (events, ended) = s.await.unwrap();
        let (last_at, last) = events.last().unwrap();
        // Close-listener mode: the 503's Retry-After of 1 s.
        assert_eq!(&last[..], b"retry: 1000\n\n");
        assert_eq!(*last_at, ended, "the stream ends with its retry event");
        // The events kept coming through the 300 ms shutdown delay.
        let data = events
            .iter()
            .filter(|(_, e)| e.starts_with(b"data:"))
            .count();
        assert!(data >= 5, "{data} events: {events:?}");
        ends.push(ended - started);
    }
    ends.sort();
    // NotAcceptingNewRequest at 250 + 300 ms; max(3 / 10 s, 200/s): one turn every 5 ms.
    assert_eq!(
        ends,
        [
            Duration::from_millis(550),
            Duration::from_millis(555),
            Duration::from_millis(560)
        ]
    );
    assert_eq!(run.await.unwrap().unwrap(), 0);
    assert_eq!(handle.in_flight().long_running, 0);
}

#[path = "driver/websocket.rs"]
mod websocket;
