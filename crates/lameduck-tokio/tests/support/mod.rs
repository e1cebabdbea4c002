//! What the driver's tests share: a handler that answers with a fixed body, listeners that
//! hand out in-memory connections, and a reader of one HTTP/1 response.

// Each test file uses the part it needs.
#![allow(dead_code)]

pub mod h2;

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use lameduck_hyper::Listener;
use tokio::io::{AsyncRead, AsyncReadExt, DuplexStream};
use tower::service_fn;

/// A handler that answers every request with `body`.
pub fn service(
    body: &'static str,
) -> impl tower::Service<
    Request<hyper::body::Incoming>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone
       + Send
       + 'static {
    service_fn(move |_req: Request<hyper::body::Incoming>| async move {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
            body.as_bytes(),
        ))))
    })
}

/// A listener that hands out one in-memory connection, then waits forever.
pub struct OneConnection(pub Option<DuplexStream>);

impl Listener for OneConnection {
    type Io = TokioIo<DuplexStream>;

    async fn accept(&mut self) -> io::Result<(Self::Io, SocketAddr)> {
        match self.0.take() {
            Some(io) => Ok((TokioIo::new(io), ([127, 0, 0, 1], 2).into())),
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(([127, 0, 0, 1], 1).into())
    }
}

/// A listener that hands out its in-memory connections in order, then waits forever.
pub struct Connections(pub Vec<DuplexStream>);

impl Listener for Connections {
    type Io = TokioIo<DuplexStream>;

    async fn accept(&mut self) -> io::Result<(Self::Io, SocketAddr)> {
        if self.0.is_empty() {
            std::future::pending::<()>().await;
        }
        Ok((TokioIo::new(self.0.remove(0)), ([127, 0, 0, 1], 2).into()))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(([127, 0, 0, 1], 1).into())
    }
}

/// Reads one HTTP/1 response (head and a body of `content-length`), bounded by 5 seconds
/// (of tokio's clock, virtual when paused); the text, or what was read when the connection closed first.
pub async fn read_response(client: &mut (impl AsyncRead + Unpin)) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let text = String::from_utf8_lossy(&all).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(str::to_string)
                    })
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= len {
                    return;
                }
            }
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    String::from_utf8_lossy(&all).to_string()
}
