//! The example routes for actix-web, shared by `examples/actix_server.rs` and the bare
//! baseline of the benchmarks (which has no lameduck middleware, so `/watch` gets no
//! shutdown notice there and streams until the client leaves).

use std::sync::Arc;

use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use actix_ws::Message;
use futures_util::StreamExt;
use lameduck::Shared;
use lameduck_actix::websocket::GoingAway;
use lameduck_hyper::ShutdownNotice;
use lameduck_tokio::TokioRuntime;

use lameduck_examples::routes;

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

/// `GET /watch`: one line per 500 ms until the server's shutdown notice, if any.
pub async fn watch(req: HttpRequest) -> HttpResponse {
    let notice = req.extensions().get::<ShutdownNotice>().cloned();
    let lines = routes::watch_lines(TokioRuntime, notice).map(Ok::<_, std::convert::Infallible>);
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .streaming(lines)
}

/// `GET /events`: Server-Sent Events every 100 ms; once the server stops accepting they keep
/// coming until the stream's turn in the paced drain, then a `retry:` event ends the stream
/// (see [`routes::events_response`]).
pub async fn events(req: HttpRequest) -> HttpResponse {
    let notice = req.extensions().get::<ShutdownNotice>().cloned();
    let events = routes::events(TokioRuntime);
    let events = lameduck_hyper::sse::end_at_turn(TokioRuntime, notice, events)
        .map(Ok::<_, std::convert::Infallible>);
    HttpResponse::Ok()
        .content_type(lameduck_hyper::sse::CONTENT_TYPE)
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-cache"))
        .streaming(events)
}

/// `GET /ws`: a WebSocket echo of text and binary messages (actix-ws). Admitted as
/// long-running (an upgrade), it echoes until the socket's turn in the paced drain, then says
/// goodbye with Close 1001 "server shutting down" and waits for the client's Close (see
/// [`lameduck_actix::websocket`]); without the middleware in front it echoes until the client
/// closes.
pub async fn ws(req: HttpRequest, body: web::Payload) -> Result<HttpResponse, actix_web::Error> {
    let (response, session, stream) = lameduck_actix::websocket::handle(&req, body)?;
    let shutdown = lameduck_actix::websocket::shutdown(&req);
    // actix-ws's stream is served from a task of the worker.
    actix_web::rt::spawn(async move {
        match shutdown {
            Some(shutdown) => {
                let mut ws = GoingAway::new(shutdown, session, stream);
                while let Some(Ok(message)) = ws.next().await {
                    if echo(ws.session(), message).await.is_err() {
                        break;
                    }
                }
                ws.close().await;
            }
            None => echo_until_closed(session, stream).await,
        }
    });
    Ok(response)
}

/// Sends a text or binary `message` back; other messages are not echoed.
async fn echo(session: &mut actix_ws::Session, message: Message) -> Result<(), actix_ws::Closed> {
    match message {
        Message::Text(text) => session.text(text).await,
        Message::Binary(bytes) => session.binary(bytes).await,
        _ => Ok(()),
    }
}

/// The echo without a shutdown: until the client closes (answered with its own reason), its
/// stream ends or breaks the protocol (answered with Close 1002).
async fn echo_until_closed(mut session: actix_ws::Session, mut stream: actix_ws::MessageStream) {
    let reason = loop {
        let sent = match stream.recv().await {
            Some(Ok(Message::Close(reason))) => break reason,
            Some(Ok(Message::Ping(bytes))) => session.pong(&bytes).await,
            Some(Ok(message)) => echo(&mut session, message).await,
            Some(Err(_)) => break Some(actix_ws::CloseCode::Protocol.into()),
            None => return,
        };
        if sent.is_err() {
            return;
        }
    };
    let _ = session.close(reason).await;
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

/// `GET /bytes?size=N`: a normal 200 `application/octet-stream` of N bytes with
/// `Content-Length: N`, in 64 KiB slices of one static buffer, each ready at once (see
/// [`routes::bytes_route`]); 400 with the parse error when `size` is missing or invalid.
pub async fn bytes(req: HttpRequest) -> HttpResponse {
    let query = Some(req.query_string()).filter(|q| !q.is_empty());
    match routes::bytes_size(query) {
        Ok(size) => {
            let mut left = size;
            let chunks = std::iter::from_fn(move || routes::next_bytes_chunk(&mut left));
            let chunks = futures_util::stream::iter(chunks).map(Ok::<_, std::convert::Infallible>);
            HttpResponse::Ok()
                .content_type("application/octet-stream")
                .body(actix_web::body::SizedStream::new(size, chunks))
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
                .body(lameduck_examples::metrics::render(&shared))
        }
        Err(e) => HttpResponse::BadRequest().body(format!("{e}\n")),
    }
}

/// The `/metrics` route for an `App`, reporting on `shared` (the lifecycle's
/// `server.shared().clone()`): `.route("/metrics", actix_routes::metrics_route(shared))`.
pub fn metrics_route(shared: Arc<Shared>) -> actix_web::Route {
    web::get().to(move |req: HttpRequest| metrics(req, Arc::clone(&shared)))
}
