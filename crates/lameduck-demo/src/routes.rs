//! The example servers' routes (`docs/design.md#example-servers`), written once for every
//! hyper-based server and generic over the runtime. `/metrics` renders with a function the
//! server passes in ([`RenderMetrics`]), so that this crate needs no metrics exporter.

use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::{select, Either};
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use lameduck::{RequestInfo, Shared};
use lameduck_hyper::{Runtime, ShutdownNotice};

pub use crate::response::{text, RouteBody};
pub use crate::websocket::{echo_until_turn, tokio_tungstenite_echo, ServeSocket};

/// How often `/watch` sends a line.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// How often `/events` sends an event.
pub const EVENTS_INTERVAL: Duration = Duration::from_millis(100);

/// How often `/stream` sends a line.
pub const STREAM_INTERVAL: Duration = Duration::from_millis(100);

/// The largest body `/bytes` sends: 1 GiB.
pub const BYTES_MAX_SIZE: u64 = 1 << 30;

/// The size of the chunks `/bytes` streams its body in.
pub const BYTES_CHUNK: usize = 64 * 1024;

/// The bytes of every `/bytes` body: each chunk is a slice of this buffer (no allocation).
static BYTES_BUFFER: [u8; BYTES_CHUNK] = [0; BYTES_CHUNK];

/// The `Content-Type` of `/metrics`: Prometheus' text exposition format.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Renders the body of `/metrics` for a lifecycle's shared state: the example servers pass
/// one that records lameduck's state and renders their Prometheus recorder.
pub type RenderMetrics = fn(&Shared) -> String;

/// What `/metrics` reports on: a lifecycle's shared state and how to render it.
#[derive(Clone)]
pub struct MetricsSource {
    /// The lifecycle's shared state (`server.shared().clone()`).
    pub shared: Arc<Shared>,
    /// Renders the text exposition of `shared`.
    pub render: RenderMetrics,
}

impl std::fmt::Debug for MetricsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsSource").finish_non_exhaustive()
    }
}

/// The examples' long-running predicate: `/watch` and `/events`, plus the default
/// long-running requests of `docs/design.md#request-classes`.
#[must_use]
pub fn is_long_running(info: &RequestInfo<'_>) -> bool {
    matches!(info.path, "/watch" | "/events") || lameduck::default_is_long_running(info)
}

/// The raw value of query parameter `name` (the first one), if present.
fn query_param<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query.unwrap_or("").split('&').find_map(|pair| {
        pair.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('='))
    })
}

/// The `duration` query parameter of `/sleep` and `/stream`, parsed as a Go duration.
pub fn sleep_duration(query: Option<&str>) -> Result<Duration, String> {
    let raw = query_param(query, "duration")
        .ok_or_else(|| "missing query parameter duration".to_string())?;
    lameduck::parse_duration(raw).map_err(|e| format!("invalid duration parameter: {e}"))
}

/// The `size` query parameter of `/bytes`: a decimal integer from 0 to [`BYTES_MAX_SIZE`].
pub fn bytes_size(query: Option<&str>) -> Result<u64, String> {
    let raw = query_param(query, "size").ok_or("missing query parameter size")?;
    let invalid = |why: &str| format!("invalid size parameter {raw:?}: {why}");
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid("not a decimal integer"));
    }
    let n = raw.parse().ok().filter(|&n| n <= BYTES_MAX_SIZE);
    n.ok_or_else(|| invalid("above 1073741824"))
}

/// The optional `delay` query parameter of `/metrics` (a simulated slow scrape), parsed as a
/// Go duration: `Ok(None)` when absent.
pub fn metrics_delay(query: Option<&str>) -> Result<Option<Duration>, String> {
    query_param(query, "delay")
        .map(|raw| {
            lameduck::parse_duration(raw).map_err(|e| format!("invalid delay parameter: {e}"))
        })
        .transpose()
}

/// The optional `after` query parameter of `/metrics`: a signal's exact name, to answer only
/// once it has fired (a testing aid, like `delay`). `Ok(None)` when absent.
pub fn metrics_after(query: Option<&str>) -> Result<Option<lameduck::LifecycleSignal>, String> {
    query_param(query, "after")
        .map(|raw| {
            lameduck::LifecycleSignal::from_name(raw)
                .ok_or_else(|| format!("invalid after parameter: unknown signal {raw:?}"))
        })
        .transpose()
}

/// `now + d`, or a deadline decades away when that would overflow (`/sleep?duration=2562047h`
/// must not panic the server).
#[must_use]
pub fn deadline_after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(30 * 365 * 86_400)))
        .unwrap_or(now)
}

/// The routes as a tower service on runtime `runtime`, without `/metrics` (there is no
/// lifecycle to report on; the bare baselines of the benchmarks use this).
pub fn service<R: Runtime + Unpin>(
    runtime: R,
) -> impl tower::Service<
    Request<hyper::body::Incoming>,
    Response = Response<RouteBody>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<RouteBody>, Infallible>> + Send,
> + Clone
       + Send
       + 'static {
    service_inner(runtime, None, tokio_tungstenite_echo::<R>)
}

/// The routes as a tower service on runtime `runtime`, with `/metrics` reporting on the
/// lifecycle whose shared state is `shared` (`server.shared().clone()`), rendered by `render`,
/// and `/ws` sockets served by `serve_socket` with the WebSocket crate of the server's
/// ecosystem ([`tokio_tungstenite_echo`] on tokio).
pub fn service_with_metrics<R: Runtime + Unpin>(
    runtime: R,
    shared: Arc<Shared>,
    render: RenderMetrics,
    serve_socket: ServeSocket<R>,
) -> impl tower::Service<
    Request<hyper::body::Incoming>,
    Response = Response<RouteBody>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<RouteBody>, Infallible>> + Send,
> + Clone
       + Send
       + 'static {
    service_inner(
        runtime,
        Some(MetricsSource { shared, render }),
        serve_socket,
    )
}

fn service_inner<R: Runtime + Unpin>(
    runtime: R,
    metrics: Option<MetricsSource>,
    serve_socket: ServeSocket<R>,
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
        let metrics = metrics.clone();
        async move { Ok::<_, Infallible>(route(runtime, metrics, serve_socket, req).await) }
    })
}

async fn route<R: Runtime + Unpin, B: Send + 'static>(
    runtime: R,
    metrics: Option<MetricsSource>,
    serve_socket: ServeSocket<R>,
    req: Request<B>,
) -> Response<RouteBody> {
    if req.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    match req.uri().path() {
        "/" => text(StatusCode::OK, "ok"),
        "/sleep" => match sleep_duration(req.uri().query()) {
            Ok(d) => {
                runtime.sleep_until(deadline_after(runtime.now(), d)).await;
                text(StatusCode::OK, "Welcome HTTP Server")
            }
            Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
        },
        "/watch" => {
            let notice = req.extensions().get::<ShutdownNotice>().cloned();
            watch_response(runtime, notice)
        }
        "/events" => {
            let notice = req.extensions().get::<ShutdownNotice>().cloned();
            events_response(runtime, notice)
        }
        "/stream" => stream_route(runtime, req.uri().query()),
        "/bytes" => bytes_route(req.uri().query()),
        "/ws" => crate::websocket::ws_route(runtime, serve_socket, req),
        "/metrics" => match metrics {
            Some(metrics) => metrics_route(runtime, metrics, req.uri().query()).await,
            None => text(StatusCode::NOT_FOUND, "404 page not found\n"),
        },
        _ => text(StatusCode::NOT_FOUND, "404 page not found\n"),
    }
}

/// One line per [`WATCH_INTERVAL`] (the first at once), ending once `notice` fires (never,
/// without a notice).
pub fn watch_lines<R: Runtime>(
    runtime: R,
    notice: Option<ShutdownNotice>,
) -> impl futures_util::Stream<Item = Bytes> + Send {
    futures_util::stream::unfold((runtime, notice, 0u64), |(runtime, notice, n)| async move {
        if n > 0 {
            let sleep = pin!(runtime.sleep_until(runtime.now() + WATCH_INTERVAL));
            match &notice {
                Some(s) => {
                    if let Either::Right(_) = select(sleep, pin!(s.wait())).await {
                        return None;
                    }
                }
                None => sleep.await,
            }
        }
        if notice.as_ref().is_some_and(ShutdownNotice::is_fired) {
            return None;
        }
        Some((
            Bytes::from(format!("event {n}\n")),
            (runtime, notice, n + 1),
        ))
    })
}

/// A chunked response streaming [`watch_lines`].
pub fn watch_response<R: Runtime>(
    runtime: R,
    notice: Option<ShutdownNotice>,
) -> Response<RouteBody> {
    use futures_util::StreamExt;
    let frames = watch_lines(runtime, notice).map(|line| Ok::<_, Infallible>(Frame::data(line)));
    let mut res = Response::new(StreamBody::new(frames).boxed_unsync());
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}

/// `id: N` and `data: event N` every [`EVENTS_INTERVAL`] (the first at once), without end.
pub fn events<R: Runtime>(runtime: R) -> impl futures_util::Stream<Item = Bytes> + Send {
    let start = runtime.now();
    futures_util::stream::unfold((runtime, start, 0u64), |(runtime, next, n)| async move {
        runtime.sleep_until(next).await;
        let event = Bytes::from(format!("id: {n}\ndata: event {n}\n\n"));
        Some((event, (runtime, next + EVENTS_INTERVAL, n + 1)))
    })
}

/// `GET /events`: Server-Sent Events ([`events`]) that, once the server stops accepting,
/// keep coming until the stream's turn in the paced long-running drain, then end with a
/// `retry:` event ([`lameduck_hyper::sse::end_at_turn`]).
pub fn events_response<R: Runtime>(
    runtime: R,
    notice: Option<ShutdownNotice>,
) -> Response<RouteBody> {
    use futures_util::StreamExt;
    let events = lameduck_hyper::sse::end_at_turn(runtime.clone(), notice, events(runtime));
    let frames = events.map(|event| Ok::<_, Infallible>(Frame::data(event)));
    let mut res = Response::new(StreamBody::new(frames).boxed_unsync());
    let headers = res.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(lameduck_hyper::sse::CONTENT_TYPE),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    res
}

/// `GET /stream?duration=D`: a normal (not long-running) chunked 200 streaming
/// [`stream_lines`], or 400 with the parse error when `duration` is missing or invalid.
pub fn stream_route<R: Runtime>(runtime: R, query: Option<&str>) -> Response<RouteBody> {
    match sleep_duration(query) {
        Ok(d) => stream_response(runtime, d),
        Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    }
}

/// One line per [`STREAM_INTERVAL`] (the first at once, the `n`-th at `n` intervals after
/// the call, without drift) until `duration` has passed since the call; then the stream
/// ends (a clean end of the body: the final chunk in HTTP/1.1, `END_STREAM` in HTTP/2).
pub fn stream_lines<R: Runtime>(
    runtime: R,
    duration: Duration,
) -> impl futures_util::Stream<Item = Bytes> + Send {
    let start = runtime.now();
    let end = deadline_after(start, duration);
    futures_util::stream::unfold((runtime, 0u32), move |(runtime, n)| async move {
        if n > 0 {
            let tick = deadline_after(start, STREAM_INTERVAL.saturating_mul(n));
            if tick >= end {
                runtime.sleep_until(end).await;
                return None;
            }
            runtime.sleep_until(tick).await;
        }
        Some((
            Bytes::from(format!("line {n}\n")),
            (runtime, n.saturating_add(1)),
        ))
    })
}

/// A chunked 200 streaming [`stream_lines`] for `duration`.
pub fn stream_response<R: Runtime>(runtime: R, duration: Duration) -> Response<RouteBody> {
    use futures_util::StreamExt;
    let frames = stream_lines(runtime, duration).map(|line| Ok::<_, Infallible>(Frame::data(line)));
    let mut res = Response::new(StreamBody::new(frames).boxed_unsync());
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}

/// The next chunk of a `/bytes` body that has `left` bytes to go (taken off `left`), or
/// `None` at its end: a slice of one static 64 KiB buffer, ready at once.
pub fn next_bytes_chunk(left: &mut u64) -> Option<Bytes> {
    let n = (*left).min(BYTES_CHUNK as u64);
    *left -= n;
    // `n` is at most BYTES_CHUNK.
    (n > 0).then(|| Bytes::from_static(&BYTES_BUFFER[..n as usize]))
}

/// The body of `/bytes`: [`next_bytes_chunk`] until `left` is 0, its exact size known (so
/// the response carries `Content-Length`, not chunks).
#[derive(Debug)]
struct BytesBody {
    left: u64,
}

impl http_body::Body for BytesBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(next_bytes_chunk(&mut self.left).map(|chunk| Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

/// `GET /bytes?size=N`: a *normal* 200 `application/octet-stream` of N bytes with
/// `Content-Length: N`, streamed in [`BYTES_CHUNK`] chunks that are each ready at once; 400
/// with the parse error when `size` is missing, not a decimal integer or above
/// [`BYTES_MAX_SIZE`].
#[must_use]
pub fn bytes_route(query: Option<&str>) -> Response<RouteBody> {
    let size = match bytes_size(query) {
        Ok(size) => size,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    let mut res = Response::new(BytesBody { left: size }.boxed_unsync());
    let headers = res.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(size));
    res
}

/// A `/metrics` reply: `200` with `metrics`' text exposition, now, and
/// [`METRICS_CONTENT_TYPE`].
#[must_use]
pub fn metrics_response(metrics: &MetricsSource) -> Response<RouteBody> {
    let mut res = text(StatusCode::OK, (metrics.render)(&metrics.shared));
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(METRICS_CONTENT_TYPE),
    );
    res
}

/// `GET /metrics[?delay=D][&after=SIGNAL]`: waits `D` (a simulated slow scrape), then until
/// the signal named `SIGNAL` has fired, and only then samples the metrics and answers with
/// [`metrics_response`]; 400 with the parse error when `delay` or `after` is invalid.
/// `/metrics` is exempt from admission by the core's default exempt path prefixes.
pub fn metrics_route<R: Runtime>(
    runtime: R,
    metrics: MetricsSource,
    query: Option<&str>,
) -> impl Future<Output = Response<RouteBody>> + Send + 'static {
    let wait = metrics_delay(query).and_then(|d| Ok((d, metrics_after(query)?)));
    async move {
        match wait {
            Ok((delay, after)) => {
                if let Some(d) = delay {
                    runtime.sleep_until(deadline_after(runtime.now(), d)).await;
                }
                if let Some(signal) = after {
                    metrics.shared.signal_fired(signal).await;
                }
                metrics_response(&metrics)
            }
            Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
        }
    }
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

    #[test]
    fn bytes_size_is_a_bounded_decimal_integer() {
        assert_eq!(bytes_size(Some("size=0")), Ok(0));
        assert_eq!(bytes_size(Some("a=1&size=65537")), Ok(65_537));
        assert_eq!(bytes_size(Some("size=1073741824")), Ok(BYTES_MAX_SIZE));
        let bad = [
            "1073741825",
            "99999999999999999999",
            "-1",
            "+1",
            "1k",
            "",
            " 1",
        ];
        for raw in bad {
            let e = bytes_size(Some(&format!("size={raw}"))).unwrap_err();
            assert!(e.contains("size parameter"), "{raw}: {e}");
        }
        assert!(bytes_size(None).unwrap_err().contains("missing"));
        assert!(bytes_size(Some("sizes=1")).is_err());
    }

    #[test]
    fn bytes_chunks_are_64_kib_slices_of_one_buffer() {
        let mut left = 2 * BYTES_CHUNK as u64 + 3;
        let chunks: Vec<Bytes> = std::iter::from_fn(|| next_bytes_chunk(&mut left)).collect();
        let sizes: Vec<usize> = chunks.iter().map(Bytes::len).collect();
        assert_eq!(sizes, [BYTES_CHUNK, BYTES_CHUNK, 3]);
        assert!(chunks.iter().all(|c| c.as_ptr() == BYTES_BUFFER.as_ptr()));
        let res = bytes_route(Some("size=70000"));
        assert_eq!(res.headers()[http::header::CONTENT_LENGTH], "70000");
        assert_eq!(http_body::Body::size_hint(res.body()).exact(), Some(70_000));
        assert_eq!(bytes_route(None).status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn query_parameters_are_matched_by_whole_name() {
        assert_eq!(query_param(Some("a=1&duration=2s"), "duration"), Some("2s"));
        assert_eq!(query_param(Some("durationx=2s"), "duration"), None);
        assert_eq!(query_param(Some("delay"), "delay"), None);
        assert_eq!(query_param(None, "delay"), None);
    }

    #[test]
    fn metrics_delay_is_optional_and_reports_errors() {
        assert_eq!(metrics_delay(None), Ok(None));
        assert_eq!(metrics_delay(Some("")), Ok(None));
        assert_eq!(metrics_delay(Some("other=1")), Ok(None));
        assert_eq!(
            metrics_delay(Some("delay=2s")),
            Ok(Some(Duration::from_secs(2)))
        );
        assert_eq!(
            metrics_delay(Some("x=1&delay=1m30s")),
            Ok(Some(Duration::from_secs(90)))
        );
        let e = metrics_delay(Some("delay=bogus")).unwrap_err();
        assert!(e.contains("delay") && e.contains("bogus"), "{e}");
        assert!(metrics_delay(Some("delay=5")).is_err());
        assert!(metrics_delay(Some("delay=")).is_err());
    }

    #[test]
    fn stream_duration_is_required() {
        assert_eq!(
            sleep_duration(Some("duration=5s")),
            Ok(Duration::from_secs(5))
        );
        assert!(sleep_duration(Some("delay=5s")).is_err());
    }

    #[test]
    fn deadline_after_saturates() {
        let now = Instant::now();
        assert_eq!(
            deadline_after(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
        assert!(deadline_after(now, Duration::MAX) > now + Duration::from_secs(86_400));
    }

    #[test]
    fn stream_and_metrics_are_not_long_running() {
        let info = |path, query| RequestInfo {
            path,
            query,
            accept: None,
            upgrade: false,
        };
        assert!(!is_long_running(&info("/stream", Some("duration=5s"))));
        assert!(!is_long_running(&info("/bytes", Some("size=5"))));
        assert!(!is_long_running(&info("/metrics", Some("delay=2s"))));
        assert!(is_long_running(&info("/watch", None)));
        assert!(is_long_running(&info("/events", None)));
        let shared_config = lameduck::Config::default();
        assert!(shared_config.is_exempt_path("/metrics"));
        assert!(!shared_config.is_exempt_path("/stream"));
    }

    #[test]
    fn metrics_after_names_a_signal() {
        assert_eq!(metrics_after(None), Ok(None));
        assert_eq!(
            metrics_after(Some("delay=1s&after=InFlightRequestsDrained")),
            Ok(Some(lameduck::LifecycleSignal::InFlightRequestsDrained))
        );
        assert!(metrics_after(Some("after=Bogus"))
            .unwrap_err()
            .contains("Bogus"));
    }

    #[test]
    fn stream_lines_are_paced_and_end_at_the_duration() {
        use futures_util::StreamExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let start = std::time::Instant::now();
            let lines = stream_lines(lameduck_tokio::TokioRuntime, Duration::from_millis(350));
            let mut lines = pin!(lines);
            let mut got = Vec::new();
            while let Some(line) = lines.next().await {
                got.push((line, start.elapsed()));
            }
            let ended = start.elapsed();
            let text: Vec<&[u8]> = got.iter().map(|(l, _)| &l[..]).collect();
            assert_eq!(
                text,
                [&b"line 0\n"[..], b"line 1\n", b"line 2\n", b"line 3\n"]
            );
            assert!(
                got[0].1 < Duration::from_millis(50),
                "first line at once: {got:?}"
            );
            assert!(got[3].1 >= Duration::from_millis(300), "{got:?}");
            assert!(
                ended >= Duration::from_millis(350) && ended < Duration::from_secs(2),
                "ended after {ended:?}"
            );
        });
    }
}
