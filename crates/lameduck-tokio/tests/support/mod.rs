//! What the driver's tests share: a handler that answers with a fixed body, servers without
//! OS signal handlers, and listeners that hand out in-memory connections. The raw HTTP/1 and
//! HTTP/2 clients are `lameduck_test_support`'s.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use lameduck::Config;
use lameduck_hyper::{Handle, HttpService, Listener, ServeError};
use lameduck_tokio::{Builder, Server, TokioRuntime};
use tokio::io::DuplexStream;
use tokio::task::JoinHandle;
use tower::service_fn;

/// A handler that answers every request with `body`.
pub fn service(body: &'static str) -> impl HttpService {
    service_fn(move |_req: Request<hyper::body::Incoming>| async move {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
            body.as_bytes(),
        ))))
    })
}

/// A handler answering `body` after `delay`.
pub fn slow(delay: Duration, body: Bytes) -> impl HttpService {
    service_fn(move |_req: Request<hyper::body::Incoming>| {
        let body = body.clone();
        async move {
            tokio::time::sleep(delay).await;
            Ok::<_, Infallible>(Response::new(Full::new(body)))
        }
    })
}

/// Starts configuring a server for `config` that installs no OS signal handlers: the tests
/// deliver their signals through its [`Handle`].
pub fn builder(config: Config) -> Builder<TokioRuntime> {
    let mut builder = lameduck_tokio::builder(config);
    builder.without_os_signals();
    builder
}

/// A prepared server for `config` that installs no OS signal handlers.
pub fn prepare(config: Config) -> Server<TokioRuntime> {
    builder(config).prepare()
}

/// A server's `run`, spawned.
pub type Run = JoinHandle<Result<u8, ServeError>>;

/// Serves `service` as "api" on `n` in-memory connections of `capacity` bytes each way, and
/// spawns `server`'s run: the clients' ends, the handle and the running server.
pub fn serve_in_memory(
    n: usize,
    capacity: usize,
    mut server: Server<TokioRuntime>,
    service: impl HttpService,
) -> (Vec<DuplexStream>, Handle, Run) {
    let (clients, servers): (Vec<_>, Vec<_>) = (0..n).map(|_| tokio::io::duplex(capacity)).unzip();
    server.serve("api", Connections(servers), service).unwrap();
    let handle = server.handle();
    (clients, handle, tokio::spawn(server.run()))
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
