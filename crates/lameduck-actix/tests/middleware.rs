//! The actix middleware against the core's state, driven through the typestate API (no
//! driver, no sockets): admission per phase and mode, 504, routes not ready, health.

use std::time::Duration;

use actix_web::http::{ConnectionType, StatusCode};
use actix_web::{test, web, App, HttpResponse};
use lameduck::machine::StopSource;
use lameduck::{Config, Input, Instant, Lifecycle, StdClock};
use lameduck_actix::{health_routes, AdmissionMiddleware};

fn lifecycle(config: Config, with_mux: bool) -> (Lifecycle<lameduck::Running>, StdClock) {
    let mut cfg = Lifecycle::new(config);
    if with_mux {
        cfg.add_routes_ready("crds").unwrap();
    }
    let clock = StdClock::with_epoch(std::time::Instant::now());
    (cfg.prepare().start(Instant::ZERO), clock)
}

#[actix_web::test]
async fn admission_follows_the_lifecycle_in_retry_after_mode() {
    let config = Config::builder()
        .shutdown_send_retry_after(true)
        .request_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let (mut lc, clock) = lifecycle(config, true);
    let shared = lc.shared().clone();
    let app = test::init_service(
        App::new()
            .wrap(AdmissionMiddleware::new(shared.clone(), clock))
            .route("/", web::get().to(|| async { "ok" }))
            .route(
                "/slow",
                web::get().to(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    HttpResponse::Ok().finish()
                }),
            ),
    )
    .await;

    let res = test::call_service(&app, test::TestRequest::get().uri("/").to_request()).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_ne!(
        res.response().head().connection_type(),
        ConnectionType::Close
    );
    assert_eq!(
        shared.gate().normal_in_flight(),
        1,
        "counted until its body is sent"
    );
    assert_eq!(&test::read_body(res).await[..], b"ok");
    assert_eq!(shared.gate().normal_in_flight(), 0);

    // Before MuxAndDiscoveryComplete an unknown path is "not installed yet".
    let res = test::call_service(&app, test::TestRequest::get().uri("/nope").to_request()).await;
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers().get("retry-after").unwrap(), "5");

    // The 504 travels as an actix error, which the server turns into its response.
    let err = test::try_call_service(&app, test::TestRequest::get().uri("/slow").to_request())
        .await
        .unwrap_err();
    let res = err.error_response();
    assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        res.headers().get("content-type").unwrap(),
        "application/json"
    );
    assert_eq!(
        shared.gate().normal_in_flight(),
        0,
        "released after the 504"
    );

    lc.handle_input(Input::StopRequested(StopSource::Api), Instant::ZERO)
        .unwrap();
    assert!(
        shared.gate().is_closed(),
        "delay 0: NotAcceptingNewRequest at once"
    );
    let res = test::call_service(&app, test::TestRequest::get().uri("/").to_request()).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(res.headers().get("retry-after").unwrap(), "5");
    assert_eq!(
        res.response().head().connection_type(),
        ConnectionType::Close
    );
    let body = test::read_body(res).await;
    assert_eq!(
        &body[..],
        b"The apiserver is shutting down, please try again later.\n"
    );

    // Exempt: health is still answered, with the keep-alive connection closed after it.
    let res = test::call_service(&app, test::TestRequest::get().uri("/readyz").to_request()).await;
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        res.response().head().connection_type(),
        ConnectionType::Close
    );
    let body = test::read_body(res).await;
    assert!(body.ends_with(b"readyz check failed\n"));
}

#[actix_web::test]
async fn close_listener_mode_rejects_with_503_and_long_running_requests_get_the_notice() {
    let config = Config::builder()
        .shutdown_watch_termination_grace_period(Duration::from_secs(5))
        .build()
        .unwrap();
    let (mut lc, clock) = lifecycle(config, false);
    let shared = lc.shared().clone();
    let app = test::init_service(
        App::new()
            .wrap(AdmissionMiddleware::new(shared.clone(), clock))
            .route(
                "/watch",
                web::get().to(|req: actix_web::HttpRequest| async move {
                    use actix_web::HttpMessage;
                    let notice = req
                        .extensions()
                        .get::<lameduck_actix::ShutdownNotice>()
                        .cloned();
                    HttpResponse::Ok().body(if notice.is_some() { "notice" } else { "none" })
                }),
            ),
    )
    .await;
    let res = test::call_service(
        &app,
        test::TestRequest::get()
            .uri("/watch?watch=true")
            .to_request(),
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        shared.gate().long_running_in_flight(),
        1,
        "counted until the body ends"
    );
    assert_eq!(&test::read_body(res).await[..], b"notice");
    assert_eq!(shared.gate().long_running_in_flight(), 0);

    lc.handle_input(Input::StopRequested(StopSource::Api), Instant::ZERO)
        .unwrap();
    let res = test::call_service(
        &app,
        test::TestRequest::get()
            .uri("/watch?watch=true")
            .to_request(),
    )
    .await;
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers().get("retry-after").unwrap(), "1");
}

/// The middleware answers the health endpoints before any route is tried; with
/// `serve_health(false)` the app routes them, with `health_routes` after its own.
#[actix_web::test]
async fn health_is_answered_by_the_middleware_or_by_routes_mounted_after_the_app() {
    let (lc, clock) = lifecycle(Config::default(), false);
    let shared = lc.shared().clone();
    let by_middleware = test::init_service(
        App::new()
            .wrap(AdmissionMiddleware::new(shared.clone(), clock))
            .route("/", web::get().to(|| async { "ok" })),
    )
    .await;
    let by_routes = test::init_service(
        App::new()
            .wrap(AdmissionMiddleware::new(shared.clone(), clock).serve_health(false))
            .route("/", web::get().to(|| async { "ok" }))
            .configure(health_routes(shared.clone(), clock)),
    )
    .await;
    let cases: [(&str, StatusCode, &[u8]); 5] = [
        ("/readyz", StatusCode::OK, b"ok"),
        ("/livez/ping", StatusCode::OK, b"ok"),
        (
            "/healthz?verbose",
            StatusCode::OK,
            b"healthz check passed\n",
        ),
        ("/readyz/nope", StatusCode::NOT_FOUND, b""),
        ("/readyzx", StatusCode::NOT_FOUND, b""),
    ];
    for (uri, status, body_end) in cases {
        let mut bodies = Vec::new();
        for app in [&by_middleware, &by_routes] {
            let res = test::call_service(app, test::TestRequest::get().uri(uri).to_request()).await;
            assert_eq!(res.status(), status, "{uri}");
            let body = test::read_body(res).await;
            assert!(body.ends_with(body_end), "{uri}: {body:?}");
            bodies.push(body);
        }
        assert_eq!(bodies[0], bodies[1], "{uri}: the same answer either way");
    }
    assert_eq!(shared.gate().normal_in_flight(), 0);
}
