//! The example servers' routes (`docs/design.md#example-servers`), written once for every
//! hyper-based server and generic over the runtime.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{select, Either};
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use lameduck::RequestInfo;
use lameduck_hyper::{Runtime, ShutdownSignal};

/// The body type of every route.
pub type RouteBody = UnsyncBoxBody<Bytes, Infallible>;

/// How often `/watch` sends a line.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// The examples' long-running predicate: `/watch`, plus the default long-running requests of
/// `docs/design.md#request-classes`.
#[must_use]
pub fn is_long_running(info: &RequestInfo<'_>) -> bool {
    info.path == "/watch" || lameduck::default_is_long_running(info)
}

/// A text response.
#[must_use]
pub fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<RouteBody> {
    let mut res = Response::new(Full::new(body.into()).boxed_unsync());
    *res.status_mut() = status;
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}

/// The `duration` query parameter of `/sleep`, parsed as a Go duration.
pub fn sleep_duration(query: Option<&str>) -> Result<Duration, String> {
    let raw = query
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("duration="))
        .ok_or_else(|| "missing query parameter duration".to_string())?;
    lameduck::parse_duration(raw).map_err(|e| format!("invalid duration parameter: {e}"))
}

/// The routes as a tower service on runtime `runtime`.
pub fn service<R: Runtime>(
    runtime: R,
) -> impl tower::Service<
    Request<hyper::body::Incoming>,
    Response = Response<RouteBody>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<RouteBody>, Infallible>> + Send,
> + Clone
       + Send
       + 'static {
    tower::service_fn(move |req: Request<hyper::body::Incoming>| {
        let runtime = runtime.clone();
        async move { Ok::<_, Infallible>(route(runtime, req).await) }
    })
}

async fn route<R: Runtime, B>(runtime: R, req: Request<B>) -> Response<RouteBody> {
    if req.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    match req.uri().path() {
        "/" => text(StatusCode::OK, "ok"),
        "/sleep" => match sleep_duration(req.uri().query()) {
            Ok(d) => {
                runtime.sleep_until(runtime.now() + d).await;
                text(StatusCode::OK, "Welcome HTTP Server")
            }
            Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
        },
        "/watch" => {
            let signal = req.extensions().get::<ShutdownSignal>().cloned();
            watch_response(runtime, signal)
        }
        _ => text(StatusCode::NOT_FOUND, "404 page not found\n"),
    }
}

/// One line per [`WATCH_INTERVAL`] (the first at once), ending once `signal` fires (never,
/// without a signal).
pub fn watch_lines<R: Runtime>(
    runtime: R,
    signal: Option<ShutdownSignal>,
) -> impl futures_util::Stream<Item = Bytes> + Send {
    futures_util::stream::unfold((runtime, signal, 0u64), |(runtime, signal, n)| async move {
        if n > 0 {
            let sleep = pin!(runtime.sleep_until(runtime.now() + WATCH_INTERVAL));
            match &signal {
                Some(s) => {
                    if let Either::Right(_) = select(sleep, pin!(s.wait())).await {
                        return None;
                    }
                }
                None => sleep.await,
            }
        }
        if signal.as_ref().is_some_and(ShutdownSignal::is_fired) {
            return None;
        }
        Some((
            Bytes::from(format!("event {n}\n")),
            (runtime, signal, n + 1),
        ))
    })
}

/// A chunked response streaming [`watch_lines`].
pub fn watch_response<R: Runtime>(
    runtime: R,
    signal: Option<ShutdownSignal>,
) -> Response<RouteBody> {
    use futures_util::StreamExt;
    let frames = watch_lines(runtime, signal).map(|line| Ok::<_, Infallible>(Frame::data(line)));
    let mut res = Response::new(StreamBody::new(frames).boxed_unsync());
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_duration_parses_and_reports_errors() {
        assert_eq!(
            sleep_duration(Some("duration=20ms")),
            Ok(Duration::from_millis(20))
        );
        assert!(sleep_duration(Some("duration=bogus"))
            .unwrap_err()
            .contains("bogus"));
        assert!(sleep_duration(None).is_err());
    }
}
