//! The example routes for actix-web, shared by `examples/actix_server.rs` and the bare
//! baseline of the benchmarks (which has no lameduck middleware, so `/watch` gets no
//! shutdown signal there and streams until the client leaves).

use std::sync::Arc;

use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use lameduck::Shared;
use lameduck_hyper::ShutdownNotice;
use lameduck_tokio::TokioRuntime;

use crate::routes;

/// `GET /`.
pub async fn index() -> &'static str {
    "ok"
}

/// `GET /sleep?duration=D`.
pub async fn sleep(req: HttpRequest) -> HttpResponse {
    let query = Some(req.query_string()).filter(|q| !q.is_empty());
    match routes::sleep_duration(query) {
        Ok(d) => {
            tokio::time::sleep(d).await;
            HttpResponse::Ok().body("Welcome HTTP Server")
        }
        Err(e) => HttpResponse::BadRequest().body(format!("{e}\n")),
    }
}

/// `GET /watch`: one line per 500 ms until the server's shutdown signal, if any.
pub async fn watch(req: HttpRequest) -> HttpResponse {
    let signal = req.extensions().get::<ShutdownNotice>().cloned();
    let lines = routes::watch_lines(TokioRuntime, signal).map(Ok::<_, std::convert::Infallible>);
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .streaming(lines)
}

/// `GET /events`: Server-Sent Events every 100 ms; once the server stops accepting they keep
/// coming until the stream's turn in the paced drain, then a `retry:` event ends the stream
/// (see [`routes::events_response`]).
pub async fn events(req: HttpRequest) -> HttpResponse {
    let signal = req.extensions().get::<ShutdownNotice>().cloned();
    let events = routes::events(TokioRuntime);
    let events = lameduck_hyper::sse::end_at_turn(TokioRuntime, signal, events)
        .map(Ok::<_, std::convert::Infallible>);
    HttpResponse::Ok()
        .content_type(lameduck_hyper::sse::CONTENT_TYPE)
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-cache"))
        .streaming(events)
}

/// `GET /stream?duration=D`: a normal (not long-running) chunked 200, one line per 100 ms
/// until `D` has passed, then the end of the body (see [`routes::stream_lines`]); 400 with the
/// parse error when `duration` is missing or invalid.
pub async fn stream(req: HttpRequest) -> HttpResponse {
    let query = Some(req.query_string()).filter(|q| !q.is_empty());
    match routes::sleep_duration(query) {
        Ok(d) => {
            let lines =
                routes::stream_lines(TokioRuntime, d).map(Ok::<_, std::convert::Infallible>);
            HttpResponse::Ok()
                .content_type("text/plain; charset=utf-8")
                .streaming(lines)
        }
        Err(e) => HttpResponse::BadRequest().body(format!("{e}\n")),
    }
}

/// `GET /metrics[?delay=D][&after=SIGNAL]` on the lifecycle whose shared state is `shared`
/// (see [`routes::metrics_route`]).
pub async fn metrics(req: HttpRequest, shared: Arc<Shared>) -> HttpResponse {
    let query = Some(req.query_string()).filter(|q| !q.is_empty());
    let wait = routes::metrics_delay(query).and_then(|d| Ok((d, routes::metrics_after(query)?)));
    match wait {
        Ok((delay, after)) => {
            if let Some(d) = delay {
                // tokio's sleep saturates a deadline that would overflow.
                tokio::time::sleep(d).await;
            }
            if let Some(signal) = after {
                shared.signal_fired(signal).await;
            }
            HttpResponse::Ok()
                .content_type(routes::METRICS_CONTENT_TYPE)
                .body(crate::metrics::render(&shared))
        }
        Err(e) => HttpResponse::BadRequest().body(format!("{e}\n")),
    }
}

/// The `/metrics` route for an `App`, reporting on `shared` (the lifecycle's
/// `server.shared().clone()`): `.route("/metrics", actix_routes::metrics_route(shared))`.
pub fn metrics_route(shared: Arc<Shared>) -> actix_web::Route {
    web::get().to(move |req: HttpRequest| metrics(req, Arc::clone(&shared)))
}
