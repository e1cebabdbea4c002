//! The example server on axum (`docs/design.md#example-servers`): an axum `Router`, with
//! the health routes mounted explicitly, served by lameduck's server (which admits every
//! request).
//!
//! `cargo run --release --example axum_server -- --listen 127.0.0.1:8080 --shutdown-delay 5s`

use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::extract::{Extension, FromRequest, Request};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use lameduck_examples::{flags, logging, metrics, routes, server, tls};
use lameduck_tokio::{ShutdownNotice, TokioRuntime};

fn main() {
    let flags = flags::from_env_or_exit();
    logging::init();
    metrics::install(); // the Prometheus recorder, before the lifecycle records anything
    let tls = tls::load_or_exit(&flags);
    let sockets = server::open_sockets_or_exit(&flags);
    server::exit_with_tokio(|| async move {
        let tls = tls.as_ref().map(lameduck_tokio::TlsAcceptor::new);
        server::run(
            &flags,
            TokioRuntime,
            sockets,
            lameduck_tokio::from_std,
            tls,
            app,
        )
        .await
    })
}

async fn sleep(uri: Uri) -> Response {
    match routes::sleep_duration(uri.query()) {
        Ok(d) => {
            tokio::time::sleep(d).await;
            "Welcome HTTP Server".into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

/// `GET /bytes?size=N`: N bytes in 64 KiB chunks, each ready at once (`routes::bytes_route`).
async fn bytes(uri: Uri) -> Response {
    routes::bytes_route(uri.query()).map(axum::body::Body::new)
}

async fn watch(notice: Option<Extension<ShutdownNotice>>) -> Response {
    routes::watch_response(TokioRuntime, notice.map(|Extension(n)| n)).map(axum::body::Body::new)
}

async fn events(notice: Option<Extension<ShutdownNotice>>) -> Response {
    routes::events_response(TokioRuntime, notice.map(|Extension(n)| n)).map(axum::body::Body::new)
}

/// axum's `ws` messages, for the goodbye (`lameduck_tokio::websocket::AXUM` with the feature
/// `axum`; defined here so that the demo, which shares lameduck-tokio's features with the
/// example servers, does not build axum).
const AXUM_MESSAGES: lameduck_tokio::websocket::MessageKind<Message, axum::Error> =
    lameduck_tokio::websocket::MessageKind {
        close: |code, reason| {
            Message::Close(Some(axum::extract::ws::CloseFrame {
                code,
                reason: reason.into(),
            }))
        },
        is_close: |m| matches!(m, Message::Close(_)),
        // The tungstenite error inside axum's says which close status answers it.
        error_status: |e| {
            use std::error::Error as _;
            e.source()
                .and_then(|inner| inner.downcast_ref::<tokio_tungstenite::tungstenite::Error>())
                .map_or(
                    lameduck_tokio::websocket::PROTOCOL_ERROR,
                    lameduck_tokio::websocket::tungstenite_error_status,
                )
        },
    };

/// `GET /ws`: an echo through axum's `ws`, which says goodbye (Close 1001) at the socket's turn
/// in the drain.
async fn ws(req: Request) -> Response {
    let shutdown = lameduck_tokio::websocket::WebSocketShutdown::take(&req);
    let upgrade = match WebSocketUpgrade::from_request(req, &()).await {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    upgrade.on_upgrade(move |socket| {
        let kind = AXUM_MESSAGES;
        let is_data = |m: &Message| matches!(m, Message::Text(_) | Message::Binary(_));
        lameduck_examples::routes::echo_until_turn(TokioRuntime, shutdown, socket, kind, is_data)
    })
}

/// The routes and the health routes; the server admits every request, classifying `/watch`
/// and `/events` as long-running, and leaves the health endpoints to the router.
fn app(server: &mut lameduck_tokio::Server<lameduck_tokio::TokioRuntime>) -> Router {
    server
        .long_running(routes::is_long_running)
        .serve_health(false);
    let health = server.health_service();
    let mut app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/sleep", get(sleep))
        .route("/watch", get(watch))
        .route("/events", get(events))
        .route("/ws", get(ws))
        .route("/bytes", get(bytes))
        .route(
            "/stream",
            get(|uri: Uri| async move {
                routes::stream_route(TokioRuntime, uri.query()).map(axum::body::Body::new)
            }),
        )
        .route(
            "/metrics",
            get({
                let source = routes::MetricsSource {
                    shared: server.shared().clone(),
                    render: metrics::render,
                };
                move |uri: Uri| async move {
                    routes::metrics_route(TokioRuntime, source, uri.query())
                        .await
                        .map(axum::body::Body::new)
                }
            }),
        );
    for endpoint in ["/readyz", "/livez", "/healthz"] {
        app = app
            .route_service(endpoint, health.clone())
            .route_service(&format!("{endpoint}/{{*check}}"), health.clone());
    }
    app
}
