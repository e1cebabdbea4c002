//! The example routes for actix-web, shared by `examples/actix_server.rs` and the bare
//! baseline of the benchmarks (which has no lameduck middleware, so `/watch` gets no
//! shutdown signal there and streams until the client leaves).

use actix_web::{HttpMessage, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use lameduck_hyper::ShutdownSignal;
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
    let signal = req.extensions().get::<ShutdownSignal>().cloned();
    let lines = routes::watch_lines(TokioRuntime, signal).map(Ok::<_, std::convert::Infallible>);
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .streaming(lines)
}
