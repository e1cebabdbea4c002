//! What the integration tests share: a counting server on 127.0.0.1 (hyper, HTTP/1 and h2c),
//! hyper-util's client with and without the layer, a timer that records the waits, and a
//! bounded wait.

#![allow(dead_code)]

pub mod raw_h2;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use lameduck_client::Timer;
use tokio::net::TcpListener;

/// The header that carries each request's id, which the counting servers record.
pub const ID: &str = "x-request-id";

/// Every wait of the tests, bounded: a test that hangs fails instead.
pub async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("finished within 20 s")
}

/// What the counting server saw: requests received, requests processed (answered 2xx) by id,
/// and connections accepted.
#[derive(Clone, Default)]
pub struct Seen {
    processed: Arc<Mutex<HashMap<String, usize>>>,
    pub connections: Arc<AtomicUsize>,
    pub requests: Arc<AtomicUsize>,
    pub received: Arc<AtomicUsize>,
}

impl Seen {
    /// Records one request processed with `id`.
    pub fn record(&self, id: &str) {
        *self
            .processed
            .lock()
            .unwrap()
            .entry(id.to_owned())
            .or_default() += 1;
        self.requests.fetch_add(1, Ordering::SeqCst);
    }

    /// How many times `id` was processed.
    pub fn times(&self, id: &str) -> usize {
        self.processed.lock().unwrap().get(id).copied().unwrap_or(0)
    }

    /// Requests received in all, processed or not.
    pub fn received(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }

    /// Requests processed in all.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// No id was processed twice.
    pub fn assert_never_twice(&self) {
        let twice: Vec<_> = self
            .processed
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, &n)| n > 1)
            .map(|(id, n)| format!("{id} x{n}"))
            .collect();
        assert!(twice.is_empty(), "processed more than once: {twice:?}");
    }
}

/// A handler of the counting server: the `n`th request it received (from 0), its request.
pub type Handler = Arc<dyn Fn(usize, &Request<Incoming>) -> Response<Reply> + Send + Sync>;

/// The counting server's response body.
pub type Reply = BoxBody<Bytes, Infallible>;

/// A plain answer with `status` and `headers`.
pub fn answer(status: u16, headers: &[(&str, &str)]) -> Response<Reply> {
    let mut r = Response::new(Full::new(Bytes::from_static(b"ok")).boxed());
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    for (k, v) in headers {
        r.headers_mut().insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    r
}

/// A counting server on 127.0.0.1 (HTTP/1 and h2c): reads each request's body whole, and
/// records its id as processed when `handler` answers it with a 2xx (a 429, 503 or gRPC
/// rejection is not processing). `handler` gets the number of requests received before.
pub async fn counting_server(handler: Handler) -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Seen::default();
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            s.connections.fetch_add(1, Ordering::SeqCst);
            let (s, handler) = (s.clone(), handler.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (s, handler) = (s.clone(), handler.clone());
                    async move {
                        let n = s.received.fetch_add(1, Ordering::SeqCst);
                        let id = req
                            .headers()
                            .get(ID)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("-")
                            .to_owned();
                        let response = handler(n, &req);
                        let _ = req.into_body().collect().await;
                        let grpc_error = response
                            .headers()
                            .get("grpc-status")
                            .is_some_and(|v| v != "0");
                        if response.status().is_success() && !grpc_error {
                            s.record(&id);
                        }
                        Ok::<_, Infallible>(response)
                    }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, seen)
}

/// hyper-util's client, HTTP/1 or (with `h2`) h2c only, for bodies of type `B`.
pub fn client<B>(h2: bool) -> Client<HttpConnector, B>
where
    B: hyper::body::Body + Send + 'static + Unpin,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .build_http()
}

/// A GET of `path` on `addr` with id `id`.
pub fn get<B: Default>(addr: SocketAddr, path: &str, id: &str) -> Request<B> {
    Request::get(format!("http://{addr}{path}"))
        .header(ID, id)
        .body(B::default())
        .unwrap()
}

/// A timer that records each wait asked for and waits none.
#[derive(Clone, Default)]
pub struct Recorder {
    pub waits: Arc<Mutex<Vec<Duration>>>,
}

impl Recorder {
    pub fn waits(&self) -> Vec<Duration> {
        self.waits.lock().unwrap().clone()
    }
}

impl Timer for Recorder {
    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        self.waits.lock().unwrap().push(d);
        Box::pin(async {})
    }
}

/// A gRPC answer to `grpc.health.v1.Health/Check`: `SERVING`, then `grpc-status: 0`.
pub fn grpc_serving() -> Response<Reply> {
    let message = Bytes::from_static(&[0, 0, 0, 0, 2, 0x08, 0x01]);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let frames = [
        Ok::<_, Infallible>(http_body::Frame::data(message)),
        Ok(http_body::Frame::trailers(trailers)),
    ];
    let mut r = Response::new(StreamBody::new(futures_util::stream::iter(frames)).boxed());
    r.headers_mut()
        .insert("content-type", "application/grpc".parse().unwrap());
    r
}

/// A gRPC trailers-only `UNAVAILABLE` with `grpc-retry-pushback-ms: ms`.
pub fn grpc_unavailable(ms: &str) -> Response<Reply> {
    let mut r = Response::new(Empty::new().boxed());
    let h = r.headers_mut();
    h.insert("content-type", "application/grpc".parse().unwrap());
    h.insert("grpc-status", "14".parse().unwrap());
    h.insert("grpc-message", "shutting down".parse().unwrap());
    h.insert("grpc-retry-pushback-ms", ms.parse().unwrap());
    r
}
