//! What the admission layer answers: 503 (close-listener mode) or 429 (retry-after mode)
//! once the gate closed, health always; 503 for unknown paths until every routes-ready report came;
//! exempt requests in flight hold the drain.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use lameduck::{Config, LifecycleSignal};
use tower::{service_fn, Layer, ServiceExt};

use crate::support::builder;
use crate::{config, serve_idle_api, PreparedServer, RunningServer};

#[tokio::test(start_paused = true)]
async fn closed_gate_answers_503_in_close_listener_mode_and_429_in_retry_after_mode_but_serves_health(
) {
    for retry_after_mode in [false, true] {
        let builder = builder(config(|c| c.shutdown_send_retry_after(retry_after_mode)));
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
async fn unknown_paths_get_503_until_every_route_signal_fired() {
    let mut builder = builder(Config::default());
    let crds = builder.routes_ready("crds").unwrap();
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
    handle.report_routes_ready(crds);
    handle
        .signal_fired(LifecycleSignal::MuxAndDiscoveryComplete)
        .await;
    assert_eq!(get("/unknown").await.status(), StatusCode::NOT_FOUND);
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_exempt_request_in_flight_holds_the_drain() {
    let PreparedServer {
        server,
        handle,
        layer,
    } = serve_idle_api(builder(Config::default()));
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
        lameduck::gate::InFlight {
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
