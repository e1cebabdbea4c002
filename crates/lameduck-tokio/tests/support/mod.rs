//! What the driver's tests share: a handler that answers with a fixed body, and listeners
//! that hand out in-memory connections.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use lameduck_hyper::Listener;
use tokio::io::DuplexStream;
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
