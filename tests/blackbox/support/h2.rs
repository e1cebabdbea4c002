//! An HTTP/2 (h2c with prior knowledge) connection through hyper's client, with the frames
//! the server sends tapped (see [`super::h2tap`]) so GOAWAY is observable.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper::{HeaderMap, Request, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::task::JoinHandle;

use super::h2tap::{FrameTap, GoAway, Reset, Seen};

/// A complete HTTP/2 reply.
#[derive(Debug, Clone)]
pub struct H2Response {
    pub at: Instant,
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl H2Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Reads the whole of `resp`, the reply to `GET path` (named in the error); `at` is when
    /// its body ended.
    pub async fn read(resp: hyper::Response<Incoming>, path: &str) -> Result<H2Response, String> {
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| format!("GET {path} body: {}", with_sources(&e)))?
            .to_bytes();
        Ok(H2Response {
            at: Instant::now(),
            status: parts.status,
            version: parts.version,
            headers: parts.headers,
            body,
        })
    }
}

/// How the body of an [`H2Stream`] ended.
#[derive(Debug, Clone)]
pub enum H2End {
    /// `END_STREAM`: the body ended cleanly.
    Clean(Instant),
    /// The body failed (RST_STREAM, or the connection closed under it).
    Failed(Instant, String),
    /// Still streaming when the reader gave up.
    TimedOut,
}

/// A reply read frame by frame: when its head and each data frame arrived, and how it ended.
#[derive(Debug, Clone)]
pub struct H2Stream {
    pub status: StatusCode,
    pub head_at: Instant,
    /// Arrival of each data frame, with its bytes.
    pub data: Vec<(Instant, Bytes)>,
    pub end: H2End,
}

/// One h2c connection; `conn` resolves when hyper's connection future ends.
pub struct H2Conn {
    pub addr: SocketAddr,
    pub sender: SendRequest<Empty<Bytes>>,
    pub conn: JoinHandle<(Instant, Result<(), String>)>,
    pub seen: Arc<Mutex<Seen>>,
}

impl H2Conn {
    /// Connects and runs the prior-knowledge handshake (must be called inside a runtime).
    pub async fn connect(addr: SocketAddr) -> H2Conn {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("h2c connect to {addr}: {e}"));
        stream.set_nodelay(true).expect("nodelay");
        let (tap, seen) = FrameTap::new(stream);
        let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .handshake::<_, Empty<Bytes>>(TokioIo::new(tap))
            .await
            .expect("h2c prior-knowledge handshake");
        let conn = tokio::spawn(async move {
            let result = conn.await.map_err(|e| e.to_string());
            (Instant::now(), result)
        });
        H2Conn {
            addr,
            sender,
            conn,
            seen,
        }
    }

    /// Sends `GET path` on this connection, once the connection is ready for it (within 5 s);
    /// the reply to come.
    async fn send_get(
        &mut self,
        path: &str,
    ) -> impl Future<Output = hyper::Result<hyper::Response<Incoming>>> {
        tokio::time::timeout(Duration::from_secs(5), self.sender.ready())
            .await
            .map_err(|_| "h2 sender not ready within 5 s".to_string())
            .and_then(|r| r.map_err(|e| format!("h2 sender: {}", with_sources(&e))))
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let request = Request::builder()
            .uri(format!("http://{}{path}", self.addr))
            .body(Empty::<Bytes>::new())
            .expect("request");
        self.sender.send_request(request)
    }

    /// Starts `GET path` on this connection; the returned task resolves to the whole reply
    /// (bounded by 20 s).
    pub async fn start_get(&mut self, path: &str) -> JoinHandle<Result<H2Response, String>> {
        let response = self.send_get(path).await;
        let path = path.to_string();
        tokio::spawn(async move {
            let work = async {
                let resp = response
                    .await
                    .map_err(|e| format!("GET {path}: {}", with_sources(&e)))?;
                H2Response::read(resp, &path).await
            };
            tokio::time::timeout(Duration::from_secs(20), work)
                .await
                .unwrap_or_else(|_| Err(format!("GET {path}: no reply within 20 s")))
        })
    }

    /// Starts `GET path` on this connection; the returned task reads the reply frame by frame
    /// and resolves when the body ends, fails, or is still streaming `limit` after the start.
    /// `Err` when no head arrived.
    pub async fn start_get_streaming(
        &mut self,
        path: &str,
        limit: Duration,
    ) -> JoinHandle<Result<H2Stream, String>> {
        let response = self.send_get(path).await;
        let path = path.to_string();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + limit;
            let resp = tokio::time::timeout_at(deadline, response)
                .await
                .map_err(|_| format!("GET {path}: no head within {limit:?}"))?
                .map_err(|e| format!("GET {path}: {}", with_sources(&e)))?;
            let head_at = Instant::now();
            let status = resp.status();
            let mut body = resp.into_body();
            let mut data = Vec::new();
            let end = loop {
                match tokio::time::timeout_at(deadline, body.frame()).await {
                    Err(_) => break H2End::TimedOut,
                    Ok(None) => break H2End::Clean(Instant::now()),
                    Ok(Some(Err(e))) => break H2End::Failed(Instant::now(), e.to_string()),
                    Ok(Some(Ok(frame))) => {
                        if let Ok(bytes) = frame.into_data() {
                            data.push((Instant::now(), bytes));
                        }
                    }
                }
            };
            Ok(H2Stream {
                status,
                head_at,
                data,
                end,
            })
        })
    }

    /// `GET path` and its reply.
    pub async fn get(&mut self, path: &str) -> Result<H2Response, String> {
        self.start_get(path)
            .await
            .await
            .unwrap_or_else(|e| Err(format!("task: {e}")))
    }

    /// The GOAWAY frames received so far.
    pub fn goaways(&self) -> Vec<GoAway> {
        super::h2tap::seen(&self.seen, |s| s.goaways.clone())
    }

    /// The RST_STREAM frames received so far.
    pub fn resets(&self) -> Vec<Reset> {
        super::h2tap::seen(&self.seen, |s| s.resets.clone())
    }

    /// When the server closed the socket, if it has.
    pub fn eof_at(&self) -> Option<Instant> {
        super::h2tap::seen(&self.seen, |s| s.eof_at)
    }

    /// Waits up to `within` for a GOAWAY frame; all received so far.
    pub async fn wait_goaway(&self, within: Duration) -> Vec<GoAway> {
        let deadline = Instant::now() + within;
        loop {
            let goaways = self.goaways();
            if !goaways.is_empty() || Instant::now() >= deadline {
                return goaways;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether a new request on this connection fails (as it must after GOAWAY).
    pub async fn new_request_fails(&mut self) -> Result<(), String> {
        let request = Request::builder()
            .uri(format!("http://{}/", self.addr))
            .body(Empty::<Bytes>::new())
            .expect("request");
        let sender = &mut self.sender;
        let attempt = tokio::time::timeout(Duration::from_secs(3), async {
            sender.ready().await?;
            sender.send_request(request).await.map(|r| r.status())
        })
        .await;
        match attempt {
            Ok(Err(_)) => Ok(()),
            other => Err(format!("expected an error, got {other:?}")),
        }
    }
}

/// A multi-threaded tokio runtime for one test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A tokio runtime that runs every task on the test's own thread, for tests in which the
/// server sends GOAWAY right behind an answer (retry-after mode's 429, gRPC `UNAVAILABLE`,
/// the GOAWAY chance).
///
/// hyper's HTTP/2 client hands a request to its connection and then checks the connection's
/// readiness again; if the connection task has read a GOAWAY in between, the client fails
/// the request with that GOAWAY ("connection error received: not a result of an error"),
/// although the request was sent and its answer has come. On a multi-threaded runtime the
/// connection task runs on another thread and can read both the answer and the GOAWAY in
/// that gap (a few new connections in a thousand on a loaded machine); on one thread it
/// cannot. This is the client's race, not the server's: the server's frames are in order
/// (the answer, then GOAWAY).
pub fn single_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// `error` and its sources, `: `-separated (hyper's own text says only "http2 error").
fn with_sources(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
